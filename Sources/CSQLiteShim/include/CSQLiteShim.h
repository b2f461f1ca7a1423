#ifndef CSQLITESHIM_H
#define CSQLITESHIM_H

#include <sqlite3.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/// Turns on SQLite's defensive mode, which stops SQL from corrupting the file
/// on purpose (writable_schema, direct shadow-table writes). Returns an SQLite result code.
static inline int countdown_enable_defensive(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
}

/// Whether defensive mode is on (1), off (0), or the query failed (-1).
static inline int countdown_defensive_state(sqlite3 *db) {
    int state = -1;
    if (sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, -1, &state) != SQLITE_OK) return -1;
    return state;
}

/// Asks Linux to end the calling thread's timed waits without the usual slack (up to 50 µs
/// added to batch wake-ups). Does nothing elsewhere; returns 0 on success.
static inline int countdown_precise_timer_slack(void) {
#ifdef __linux__
    return prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#else
    return 0;
#endif
}

#endif
