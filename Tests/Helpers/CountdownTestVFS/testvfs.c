// A VFS for the reliability suites: it forwards everything to the default VFS, and can stop the
// process dead in the middle of a database write, or simulate a power cut by undoing every write
// that no sync has made durable. Every tracked write, truncate and sync runs under one mutex, so
// that nothing else writes between a power cut's undo and the kill.

#include "CSQLiteTestVFS.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/// One change to a file, as needed to take it back: the bytes that were at `offset` before it,
/// and the file's size before it.
typedef struct Undo {
    sqlite3_int64 offset;
    unsigned char *old;
    int oldLength;
    sqlite3_int64 oldSize;
    struct Undo *next; /* older */
} Undo;

/// A file whose unsynced changes a power cut takes back, by path (it outlives the handle).
typedef struct Tracked {
    char *path;
    Undo *log; /* newest first */
    struct Tracked *next;
} Tracked;

typedef struct TestFile {
    sqlite3_file base;
    sqlite3_file *real;
    Tracked *tracked; /* NULL for files a power cut leaves alone */
    int isMainDB;
} TestFile;

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static sqlite3_vfs *realVFS = NULL;
static sqlite3_vfs testVFS;
static Tracked *trackedFiles = NULL;
static long operations = 0, powerLossAt = 0, dbWrites = 0, killAtDBWrite = 0;
static unsigned long long randomState = 1;

static unsigned long long nextRandom(void) {
    unsigned long long z = (randomState += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void die(void) {
    kill(getpid(), SIGKILL);
    for (;;) pause();
}

static void freeLog(Tracked *t) {
    Undo *u = t->log;
    while (u) {
        Undo *next = u->next;
        free(u->old);
        free(u);
        u = next;
    }
    t->log = NULL;
}

static Tracked *trackedFile(const char *path) {
    for (Tracked *t = trackedFiles; t; t = t->next)
        if (strcmp(t->path, path) == 0) return t;
    Tracked *t = calloc(1, sizeof(Tracked));
    t->path = strdup(path);
    t->next = trackedFiles;
    trackedFiles = t;
    return t;
}

/// Records what a change of [offset, offset + length) (or a truncation to `offset`, when
/// `length` < 0) overwrites, before the change is made.
static void recordUndo(TestFile *f, sqlite3_int64 offset, int length) {
    sqlite3_int64 size = 0;
    if (f->real->pMethods->xFileSize(f->real, &size) != SQLITE_OK) size = 0;
    Undo *u = calloc(1, sizeof(Undo));
    u->offset = offset;
    u->oldSize = size;
    sqlite3_int64 end = length < 0 ? size : offset + length;
    if (end > size) end = size;
    if (end > offset) {
        u->oldLength = (int)(end - offset);
        u->old = malloc((size_t)u->oldLength);
        if (f->real->pMethods->xRead(f->real, u->old, u->oldLength, offset) != SQLITE_OK) {
            memset(u->old, 0, (size_t)u->oldLength);
        }
    }
    u->next = f->tracked->log;
    f->tracked->log = u;
}

/// The power cut: every unsynced change undone, newest first, then the torn part of the write
/// under way (if any), then SIGKILL. Called with the mutex held; never returns.
static void cutThePower(const char *tornPath, const void *torn, int tornLength, sqlite3_int64 tornOffset) {
    for (Tracked *t = trackedFiles; t; t = t->next) {
        if (!t->log) continue;
        int fd = open(t->path, O_WRONLY);
        if (fd < 0) continue;
        for (Undo *u = t->log; u; u = u->next) {
            if (u->oldLength > 0 && pwrite(fd, u->old, (size_t)u->oldLength, u->offset) < 0) break;
            if (ftruncate(fd, u->oldSize) != 0) break;
        }
        close(fd);
    }
    if (tornPath && tornLength > 0) {
        int keep = (int)(nextRandom() % (unsigned long long)(tornLength + 1));
        if (tornLength > 512) keep -= keep % 512;
        int fd = open(tornPath, O_WRONLY);
        if (fd >= 0) {
            if (keep > 0 && pwrite(fd, torn, (size_t)keep, tornOffset) < 0) { /* nothing lands */ }
            close(fd);
        }
    }
    die();
}

/// Counts one operation toward the power cut; whether it is the one that cuts it.
static int powerCutNow(void) {
    operations++;
    return powerLossAt > 0 && operations >= powerLossAt;
}

// MARK: - io methods

static int tClose(sqlite3_file *file) {
    TestFile *f = (TestFile *)file;
    int rc = f->real->pMethods ? f->real->pMethods->xClose(f->real) : SQLITE_OK;
    return rc;
}

static int tRead(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xRead(f->real, buffer, amount, offset);
}

static int tWrite(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    TestFile *f = (TestFile *)file;
    pthread_mutex_lock(&mutex);
    if (f->isMainDB) {
        dbWrites++;
        if (killAtDBWrite > 0 && --killAtDBWrite == 0) {
            int half = amount / 2;
            if (amount > 512) half -= half % 512;
            if (half > 0) f->real->pMethods->xWrite(f->real, buffer, half, offset);
            die();
        }
    }
    if (f->tracked) {
        if (powerCutNow()) cutThePower(f->tracked->path, buffer, amount, offset);
        recordUndo(f, offset, amount);
    }
    int rc = f->real->pMethods->xWrite(f->real, buffer, amount, offset);
    pthread_mutex_unlock(&mutex);
    return rc;
}

static int tTruncate(sqlite3_file *file, sqlite3_int64 size) {
    TestFile *f = (TestFile *)file;
    pthread_mutex_lock(&mutex);
    if (f->tracked) {
        if (powerCutNow()) cutThePower(NULL, NULL, 0, 0);
        recordUndo(f, size, -1);
    }
    int rc = f->real->pMethods->xTruncate(f->real, size);
    pthread_mutex_unlock(&mutex);
    return rc;
}

static int tSync(sqlite3_file *file, int flags) {
    TestFile *f = (TestFile *)file;
    pthread_mutex_lock(&mutex);
    if (f->tracked && powerCutNow()) cutThePower(NULL, NULL, 0, 0);
    int rc = f->real->pMethods->xSync(f->real, flags);
    if (rc == SQLITE_OK && f->tracked) freeLog(f->tracked);
    pthread_mutex_unlock(&mutex);
    return rc;
}

static int tFileSize(sqlite3_file *file, sqlite3_int64 *size) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xFileSize(f->real, size);
}

static int tLock(sqlite3_file *file, int lock) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xLock(f->real, lock);
}

static int tUnlock(sqlite3_file *file, int lock) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xUnlock(f->real, lock);
}

static int tCheckReservedLock(sqlite3_file *file, int *out) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int tFileControl(sqlite3_file *file, int op, void *arg) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xFileControl(f->real, op, arg);
}

static int tSectorSize(sqlite3_file *file) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xSectorSize(f->real);
}

static int tDeviceCharacteristics(sqlite3_file *file) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xDeviceCharacteristics(f->real);
}

static int tShmMap(sqlite3_file *file, int page, int size, int extend, void volatile **out) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xShmMap(f->real, page, size, extend, out);
}

static int tShmLock(sqlite3_file *file, int offset, int n, int flags) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

static void tShmBarrier(sqlite3_file *file) {
    TestFile *f = (TestFile *)file;
    f->real->pMethods->xShmBarrier(f->real);
}

static int tShmUnmap(sqlite3_file *file, int deleteFlag) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xShmUnmap(f->real, deleteFlag);
}

static int tFetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xFetch(f->real, offset, amount, out);
}

static int tUnfetch(sqlite3_file *file, sqlite3_int64 offset, void *page) {
    TestFile *f = (TestFile *)file;
    return f->real->pMethods->xUnfetch(f->real, offset, page);
}

static const sqlite3_io_methods testMethods = {
    3, tClose, tRead, tWrite, tTruncate, tSync, tFileSize, tLock, tUnlock, tCheckReservedLock,
    tFileControl, tSectorSize, tDeviceCharacteristics, tShmMap, tShmLock, tShmBarrier, tShmUnmap,
    tFetch, tUnfetch,
};

// MARK: - vfs methods

static int tOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    (void)vfs;
    TestFile *f = (TestFile *)file;
    f->real = (sqlite3_file *)&f[1];
    f->tracked = NULL;
    f->isMainDB = (flags & SQLITE_OPEN_MAIN_DB) != 0;
    int rc = realVFS->xOpen(realVFS, name, f->real, flags, outFlags);
    if (rc != SQLITE_OK || !f->real->pMethods) {
        file->pMethods = NULL;
        return rc;
    }
    if (name && (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL))) {
        pthread_mutex_lock(&mutex);
        f->tracked = trackedFile(name);
        pthread_mutex_unlock(&mutex);
    }
    file->pMethods = &testMethods;
    return SQLITE_OK;
}

static int tDelete(sqlite3_vfs *vfs, const char *name, int syncDir) {
    (void)vfs;
    pthread_mutex_lock(&mutex);
    for (Tracked *t = trackedFiles; t; t = t->next)
        if (strcmp(t->path, name) == 0) freeLog(t);
    pthread_mutex_unlock(&mutex);
    return realVFS->xDelete(realVFS, name, syncDir);
}

static int tAccess(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    (void)vfs;
    return realVFS->xAccess(realVFS, name, flags, out);
}

static int tFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return realVFS->xFullPathname(realVFS, name, size, out);
}

static void *tDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return realVFS->xDlOpen(realVFS, name);
}

static void tDlError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    realVFS->xDlError(realVFS, size, out);
}

static void (*tDlSym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    (void)vfs;
    return realVFS->xDlSym(realVFS, handle, symbol);
}

static void tDlClose(sqlite3_vfs *vfs, void *handle) {
    (void)vfs;
    realVFS->xDlClose(realVFS, handle);
}

static int tRandomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return realVFS->xRandomness(realVFS, size, out);
}

static int tSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return realVFS->xSleep(realVFS, microseconds);
}

static int tCurrentTime(sqlite3_vfs *vfs, double *out) {
    (void)vfs;
    return realVFS->xCurrentTime(realVFS, out);
}

static int tGetLastError(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return realVFS->xGetLastError ? realVFS->xGetLastError(realVFS, size, out) : 0;
}

static int tCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    (void)vfs;
    return realVFS->xCurrentTimeInt64(realVFS, out);
}

int countdown_testvfs_register(void) {
    pthread_mutex_lock(&mutex);
    if (realVFS) {
        pthread_mutex_unlock(&mutex);
        return SQLITE_OK;
    }
    int rc = sqlite3_initialize();
    sqlite3_vfs *base = rc == SQLITE_OK ? sqlite3_vfs_find(NULL) : NULL;
    if (!base) {
        pthread_mutex_unlock(&mutex);
        return rc == SQLITE_OK ? SQLITE_ERROR : rc;
    }
    realVFS = base;
    memset(&testVFS, 0, sizeof testVFS);
    testVFS.iVersion = 2;
    testVFS.szOsFile = (int)sizeof(TestFile) + base->szOsFile;
    testVFS.mxPathname = base->mxPathname;
    testVFS.zName = "countdown-test";
    testVFS.xOpen = tOpen;
    testVFS.xDelete = tDelete;
    testVFS.xAccess = tAccess;
    testVFS.xFullPathname = tFullPathname;
    testVFS.xDlOpen = tDlOpen;
    testVFS.xDlError = tDlError;
    testVFS.xDlSym = tDlSym;
    testVFS.xDlClose = tDlClose;
    testVFS.xRandomness = tRandomness;
    testVFS.xSleep = tSleep;
    testVFS.xCurrentTime = tCurrentTime;
    testVFS.xGetLastError = tGetLastError;
    testVFS.xCurrentTimeInt64 = tCurrentTimeInt64;
    rc = sqlite3_vfs_register(&testVFS, 1);
    pthread_mutex_unlock(&mutex);
    return rc;
}

void countdown_testvfs_power_loss_after(long count, unsigned long long seed) {
    pthread_mutex_lock(&mutex);
    powerLossAt = count > 0 ? operations + count : 0;
    randomState = seed;
    pthread_mutex_unlock(&mutex);
}

void countdown_testvfs_kill_at_db_write(long n) {
    pthread_mutex_lock(&mutex);
    killAtDBWrite = n > 0 ? n : 0;
    pthread_mutex_unlock(&mutex);
}

long countdown_testvfs_db_writes(void) {
    pthread_mutex_lock(&mutex);
    long n = dbWrites;
    pthread_mutex_unlock(&mutex);
    return n;
}

long countdown_testvfs_operations(void) {
    pthread_mutex_lock(&mutex);
    long n = operations;
    pthread_mutex_unlock(&mutex);
    return n;
}
