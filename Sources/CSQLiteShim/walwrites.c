#include "CSQLiteShim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// A commit in WAL mode appends each page it changed to the `-wal` file as a frame: a header of
// 24 bytes, then the page. SQLite writes them one `write` at a time, two a frame, and a group of
// 64 starts changes about 64 pages: 128 system calls, each into pages of the file that the
// kernel must find or add. Written as one, the same bytes cost a fraction of that.
//
// This VFS passes everything to the VFS that is the default when a file is opened (SQLite's own,
// or a host's, or a test's), except the writes of a `-wal` file: those that follow each other in
// the file are gathered in memory and written as one, before anything can read them. A commit's
// last frame says it is one (the second field of its header, the database's size after the
// commit, is not zero): once its page is gathered, everything is written, and an error is the
// commit's, before SQLite makes the frames visible to other connections by updating the
// wal-index. Any other call on the `-wal` file (a read, a sync, its size, a truncation, closing
// it) writes what was gathered first; so does the database file's `xShmBarrier` and `xShmLock`,
// which come before and after the wal-index is updated. Nothing is ever read or synced that was
// not written, and the file's bytes are the ones SQLite wrote, in the order it wrote them.

#define COUNTDOWN_WAL_VFS "countdown-wal"
/// The most gathered at once (254 frames of 4 KiB pages): a group of 64 starts changes about 70
/// pages; a larger transaction is written a mebibyte at a time.
#define COUNTDOWN_GATHER_MOST (1 << 20)
#define COUNTDOWN_FRAME_HEADER 24
#define COUNTDOWN_WAL_HEADER 32

typedef struct CountdownFile CountdownFile;
struct CountdownFile {
    sqlite3_file base;
    /// The default VFS's file, just after this structure, and that VFS.
    sqlite3_file *real;
    sqlite3_vfs *vfs;
    /// For a database file: its `-wal` file while that is open. For a `-wal` file: its database's.
    CountdownFile *partner;
    int isWAL;
    /// The bytes gathered, to be written at `offset`.
    char *buffer;
    int length;
    int capacity;
    sqlite3_int64 offset;
    /// The header of a commit's last frame was gathered: its page comes next.
    int commitFrame;
};

static sqlite3_vfs countdownVFS;
static sqlite3_io_methods countdownMethods;
static pthread_once_t countdownOnce = PTHREAD_ONCE_INIT;
static int countdownRegistered = SQLITE_ERROR;

/// The default VFS, found when a file is opened (never this one).
static sqlite3_vfs *countdown_base(void) {
    sqlite3_vfs *base = sqlite3_vfs_find(0);
    if (base == &countdownVFS || base == 0) base = sqlite3_vfs_find("unix");
    return base;
}

/// The most one call of the default VFS's `xWrite` is given. SQLite's unix VFS writes at most
/// 128 KiB − 1 bytes a call and goes on with the rest, but fails with SQLITE_FULL when the rest is
/// a multiple of 128 KiB (it writes that as 0 bytes); smaller pieces never meet that.
#define COUNTDOWN_WRITE_MOST (124 << 10)

/// Writes what was gathered. Returns an SQLite result code.
static int countdown_flush(CountdownFile *file) {
    int rc = SQLITE_OK;
    for (int done = 0; done < file->length && rc == SQLITE_OK;) {
        int piece = file->length - done < COUNTDOWN_WRITE_MOST ? file->length - done : COUNTDOWN_WRITE_MOST;
        rc = file->real->pMethods->xWrite(file->real, file->buffer + done, piece, file->offset + done);
        done += piece;
    }
    file->length = 0;
    file->commitFrame = 0;
    return rc;
}

/// Writes what a database file's `-wal` file gathered, where no error can be given back: one that
/// happened there would let SQLite make frames visible that are not in the file, so the process
/// stops instead (a commit that never returned, which every crash test of the store covers).
static void countdown_flush_partner_or_stop(CountdownFile *file) {
    if (file->isWAL || file->partner == 0) return;
    if (countdown_flush(file->partner) != SQLITE_OK) abort();
}

static uint32_t countdown_big_endian(const unsigned char *bytes) {
    return (uint32_t)bytes[0] << 24 | (uint32_t)bytes[1] << 16 | (uint32_t)bytes[2] << 8 | (uint32_t)bytes[3];
}

static int cClose(sqlite3_file *f) {
    CountdownFile *file = (CountdownFile *)f;
    int flushed = file->isWAL ? countdown_flush(file) : SQLITE_OK;
    if (file->partner) file->partner->partner = 0;
    file->partner = 0;
    free(file->buffer);
    file->buffer = 0;
    int rc = file->real->pMethods ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
    return flushed != SQLITE_OK ? flushed : rc;
}

static int cRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->isWAL) {
        int rc = countdown_flush(file);
        if (rc != SQLITE_OK) return rc;
    }
    return file->real->pMethods->xRead(file->real, data, amount, offset);
}

static int cWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    CountdownFile *file = (CountdownFile *)f;
    if (!file->isWAL) return file->real->pMethods->xWrite(file->real, data, amount, offset);
    int rc;
    // Whether this is the page of a commit's last frame (kept across a write of what was gathered).
    int commitPage = file->commitFrame;
    if (file->length > 0 && (offset != file->offset + file->length || file->length + amount > COUNTDOWN_GATHER_MOST)) {
        rc = countdown_flush(file);
        if (rc != SQLITE_OK) return rc;
    }
    if (amount > COUNTDOWN_WRITE_MOST) return file->real->pMethods->xWrite(file->real, data, amount, offset);
    if (file->length + amount > file->capacity) {
        int capacity = file->capacity > 0 ? file->capacity : 64 << 10;
        while (capacity < file->length + amount) capacity *= 2;
        if (capacity > COUNTDOWN_GATHER_MOST) capacity = COUNTDOWN_GATHER_MOST;
        char *grown = realloc(file->buffer, (size_t)capacity);
        if (grown == 0) {
            // No memory to gather: write what was gathered and this, as SQLite would.
            rc = countdown_flush(file);
            if (rc != SQLITE_OK) return rc;
            return file->real->pMethods->xWrite(file->real, data, amount, offset);
        }
        file->buffer = grown;
        file->capacity = capacity;
    }
    if (file->length == 0) file->offset = offset;
    memcpy(file->buffer + file->length, data, (size_t)amount);
    file->length += amount;
    if (commitPage) return countdown_flush(file);
    if (amount == COUNTDOWN_FRAME_HEADER && offset >= COUNTDOWN_WAL_HEADER &&
        countdown_big_endian((const unsigned char *)data + 4) != 0) {
        file->commitFrame = 1;
    }
    return SQLITE_OK;
}

static int cTruncate(sqlite3_file *f, sqlite3_int64 size) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->isWAL) {
        int rc = countdown_flush(file);
        if (rc != SQLITE_OK) return rc;
    }
    return file->real->pMethods->xTruncate(file->real, size);
}

static int cSync(sqlite3_file *f, int flags) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->isWAL) {
        int rc = countdown_flush(file);
        if (rc != SQLITE_OK) return rc;
    }
    return file->real->pMethods->xSync(file->real, flags);
}

static int cFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->isWAL) {
        int rc = countdown_flush(file);
        if (rc != SQLITE_OK) return rc;
    }
    return file->real->pMethods->xFileSize(file->real, size);
}

static int cLock(sqlite3_file *f, int level) {
    CountdownFile *file = (CountdownFile *)f;
    return file->real->pMethods->xLock(file->real, level);
}

static int cUnlock(sqlite3_file *f, int level) {
    CountdownFile *file = (CountdownFile *)f;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int cCheckReservedLock(sqlite3_file *f, int *out) {
    CountdownFile *file = (CountdownFile *)f;
    return file->real->pMethods->xCheckReservedLock(file->real, out);
}

static int cFileControl(sqlite3_file *f, int op, void *argument) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->isWAL) {
        int rc = countdown_flush(file);
        if (rc != SQLITE_OK) return rc;
    }
    if (op == SQLITE_FCNTL_VFSNAME && file->real->pMethods->xFileControl(file->real, op, argument) == SQLITE_OK) {
        char *inner = *(char **)argument;
        *(char **)argument = sqlite3_mprintf("%s/%s", COUNTDOWN_WAL_VFS, inner ? inner : "");
        sqlite3_free(inner);
        return SQLITE_OK;
    }
    return file->real->pMethods->xFileControl(file->real, op, argument);
}

static int cSectorSize(sqlite3_file *f) {
    CountdownFile *file = (CountdownFile *)f;
    return file->real->pMethods->xSectorSize(file->real);
}

static int cDeviceCharacteristics(sqlite3_file *f) {
    CountdownFile *file = (CountdownFile *)f;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

static int cShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->real->pMethods->iVersion < 2) return SQLITE_IOERR_SHMMAP;
    return file->real->pMethods->xShmMap(file->real, region, size, extend, out);
}

static int cShmLock(sqlite3_file *f, int offset, int count, int flags) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->real->pMethods->iVersion < 2) return SQLITE_IOERR_SHMLOCK;
    if (!file->isWAL && file->partner) {
        int rc = countdown_flush(file->partner);
        if (rc != SQLITE_OK) return rc;
    }
    return file->real->pMethods->xShmLock(file->real, offset, count, flags);
}

static void cShmBarrier(sqlite3_file *f) {
    CountdownFile *file = (CountdownFile *)f;
    countdown_flush_partner_or_stop(file);
    if (file->real->pMethods->iVersion >= 2) file->real->pMethods->xShmBarrier(file->real);
}

static int cShmUnmap(sqlite3_file *f, int delete) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->real->pMethods->iVersion < 2) return SQLITE_OK;
    return file->real->pMethods->xShmUnmap(file->real, delete);
}

static int cFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->real->pMethods->iVersion < 3) {
        *out = 0;  // no mapping: SQLite reads instead
        return SQLITE_OK;
    }
    return file->real->pMethods->xFetch(file->real, offset, amount, out);
}

static int cUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *pointer) {
    CountdownFile *file = (CountdownFile *)f;
    if (file->real->pMethods->iVersion < 3) return SQLITE_OK;
    return file->real->pMethods->xUnfetch(file->real, offset, pointer);
}

static int cOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    // A database's journal or `-wal` file goes through the VFS its database file went through.
    CountdownFile *database = 0;
    if ((flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL)) && name) {
        sqlite3_file *object = sqlite3_database_file_object(name);
        if (object && object->pMethods == &countdownMethods) database = (CountdownFile *)object;
    }
    sqlite3_vfs *base = database ? database->vfs : countdown_base();
    CountdownFile *file = (CountdownFile *)f;
    memset(file, 0, sizeof *file);
    file->real = (sqlite3_file *)&file[1];
    file->vfs = base;
    // A default VFS registered since, whose files are larger than the room made for them.
    if (base == 0 || base->szOsFile > countdownVFS.szOsFile - (int)sizeof(CountdownFile)) return SQLITE_CANTOPEN;
    int rc = base->xOpen(base, name, file->real, flags, outFlags);
    if (rc != SQLITE_OK || file->real->pMethods == 0) return rc;
    file->base.pMethods = &countdownMethods;
    if ((flags & SQLITE_OPEN_WAL) && database) {
        file->isWAL = 1;
        file->partner = database;
        database->partner = file;
    }
    return SQLITE_OK;
}

static int cDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    return base->xDelete(base, name, syncDirectory);
}

static int cAccess(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    return base->xAccess(base, name, flags, out);
}

static int cFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    return base->xFullPathname(base, name, size, out);
}

static void *cDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    return base->xDlOpen(base, name);
}

static void cDlError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    base->xDlError(base, size, out);
}

static void (*cDlSym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    return base->xDlSym(base, handle, symbol);
}

static void cDlClose(sqlite3_vfs *vfs, void *handle) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    base->xDlClose(base, handle);
}

static int cRandomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    return base->xRandomness(base, size, out);
}

static int cSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    return base->xSleep(base, microseconds);
}

static int cCurrentTime(sqlite3_vfs *vfs, double *out) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    return base->xCurrentTime(base, out);
}

static int cGetLastError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    return base->xGetLastError ? base->xGetLastError(base, size, out) : 0;
}

static int cCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    (void)vfs;
    sqlite3_vfs *base = countdown_base();
    if (base->iVersion >= 2 && base->xCurrentTimeInt64) return base->xCurrentTimeInt64(base, out);
    double now = 0;
    int rc = base->xCurrentTime(base, &now);
    *out = (sqlite3_int64)(now * 86400000.0);
    return rc;
}

static void countdown_register(void) {
    if (sqlite3_initialize() != SQLITE_OK) return;
    sqlite3_vfs *base = countdown_base();
    if (base == 0) return;
    memset(&countdownMethods, 0, sizeof countdownMethods);
    countdownMethods.iVersion = 3;
    countdownMethods.xClose = cClose;
    countdownMethods.xRead = cRead;
    countdownMethods.xWrite = cWrite;
    countdownMethods.xTruncate = cTruncate;
    countdownMethods.xSync = cSync;
    countdownMethods.xFileSize = cFileSize;
    countdownMethods.xLock = cLock;
    countdownMethods.xUnlock = cUnlock;
    countdownMethods.xCheckReservedLock = cCheckReservedLock;
    countdownMethods.xFileControl = cFileControl;
    countdownMethods.xSectorSize = cSectorSize;
    countdownMethods.xDeviceCharacteristics = cDeviceCharacteristics;
    countdownMethods.xShmMap = cShmMap;
    countdownMethods.xShmLock = cShmLock;
    countdownMethods.xShmBarrier = cShmBarrier;
    countdownMethods.xShmUnmap = cShmUnmap;
    countdownMethods.xFetch = cFetch;
    countdownMethods.xUnfetch = cUnfetch;
    memset(&countdownVFS, 0, sizeof countdownVFS);
    countdownVFS.iVersion = 2;
    // Room for the largest file of the VFSs it may find as the default later: SQLite's own, or
    // one a host or a test registers over it (their files are rarely larger; see cOpen).
    countdownVFS.szOsFile = (int)sizeof(CountdownFile) + (base->szOsFile > 1024 ? base->szOsFile : 1024);
    countdownVFS.mxPathname = base->mxPathname;
    countdownVFS.zName = COUNTDOWN_WAL_VFS;
    countdownVFS.xOpen = cOpen;
    countdownVFS.xDelete = cDelete;
    countdownVFS.xAccess = cAccess;
    countdownVFS.xFullPathname = cFullPathname;
    countdownVFS.xDlOpen = cDlOpen;
    countdownVFS.xDlError = cDlError;
    countdownVFS.xDlSym = cDlSym;
    countdownVFS.xDlClose = cDlClose;
    countdownVFS.xRandomness = cRandomness;
    countdownVFS.xSleep = cSleep;
    countdownVFS.xCurrentTime = cCurrentTime;
    countdownVFS.xGetLastError = cGetLastError;
    countdownVFS.xCurrentTimeInt64 = cCurrentTimeInt64;
    countdownRegistered = sqlite3_vfs_register(&countdownVFS, 0);
}

const char *countdown_wal_vfs(void) {
    pthread_once(&countdownOnce, countdown_register);
    if (countdownRegistered != SQLITE_OK) return 0;
    // The default VFS now (a host's or a test's may have been registered since) must fit.
    sqlite3_vfs *base = countdown_base();
    if (base == 0 || base->szOsFile > countdownVFS.szOsFile - (int)sizeof(CountdownFile)) return 0;
    return COUNTDOWN_WAL_VFS;
}
