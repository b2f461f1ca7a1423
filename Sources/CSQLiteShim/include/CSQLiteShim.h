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

/// Syncs `db`'s main database file to its device, through its VFS. Returns an SQLite result code.
static inline int countdown_sync_database(sqlite3 *db) {
    sqlite3_file *file = 0;
    int rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file);
    if (rc != SQLITE_OK) return rc;
    if (file == 0 || file->pMethods == 0) return SQLITE_OK;
    return file->pMethods->xSync(file, SQLITE_SYNC_NORMAL);
}

/// Makes SQLite's unix VFS skip the fchown it calls at every opening of a `-wal` or `-shm` file
/// when run as root, whenever the file already has the owner it would be given (see shim.c).
/// Once per process; later calls return the first one's result. Returns an SQLite result code.
int countdown_skip_needless_fchown(void);

/// Turns off SQLite's count of the memory it allocates (`SQLITE_CONFIG_MEMSTATUS`), which takes a
/// mutex of the whole process at every allocation, if SQLite is not in use in the process yet
/// (see shim.c). Once per process; later calls return the first one's result: SQLITE_OK when it
/// was turned off, SQLITE_MISUSE when SQLite was already in use and keeps counting.
int countdown_skip_memory_statistics(void);

/// Says (`waits` 1) or stops saying (0) that a writer of `db`'s database waits for SQLite's write
/// lock, for other processes to see (see shim.c). Returns 1 when done, 0 where it cannot be.
int countdown_writer_waits(sqlite3 *db, int waits);

/// Whether a writer of another connection (another process) says it waits for the write lock
/// of `db`'s database (1) or not (0). `verify` 0: trusts the `-shm` file opened before, if any,
/// to be still the one at its path (a writer about to begin); 1: checks (a ticker's pause).
int countdown_writers_waiting(sqlite3 *db, int verify);

/// The name of a VFS that passes everything to the default VFS, but writes a `-wal` file's
/// frames of one commit together, in one write (see walwrites.c); registered on first use.
/// NULL when it cannot be used (SQLite failed to register it, or the default VFS's files do not
/// fit it).
const char *countdown_wal_vfs(void);

#endif
