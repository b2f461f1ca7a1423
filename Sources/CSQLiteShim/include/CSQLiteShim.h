#ifndef CSQLITESHIM_H
#define CSQLITESHIM_H

#include <sqlite3.h>

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

#endif
