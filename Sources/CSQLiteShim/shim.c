#define _GNU_SOURCE
#include "CSQLiteShim.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

// SQLite's unix VFS, run as root, gives every `-wal` and `-shm` file it opens (which it opens with
// O_CREAT, whether it creates them or not) the owner of the database file, by calling fchown at
// every opening. When the owner is already that one, the call changes nothing but the file's
// ctime, yet it still waits for the file's inode, which a busy writer or a checkpoint beside it
// can hold for a hundred milliseconds and more. This replacement asks first (fstat reads without
// waiting) and calls the real fchown only when the owner differs.

typedef int (*countdown_fchown_fn)(int, uid_t, gid_t);

static countdown_fchown_fn countdown_real_fchown = 0;
static pthread_once_t countdown_fchown_once = PTHREAD_ONCE_INIT;
static int countdown_fchown_result = SQLITE_ERROR;

static int countdown_needful_fchown(int fd, uid_t uid, gid_t gid) {
    struct stat status;
    if (fstat(fd, &status) == 0 && status.st_uid == uid && status.st_gid == gid) return 0;
    return countdown_real_fchown ? countdown_real_fchown(fd, uid, gid) : fchown(fd, uid, gid);
}

static void countdown_install_fchown(void) {
    sqlite3_vfs *vfs = sqlite3_vfs_find("unix");
    if (vfs == 0 || vfs->iVersion < 3 || vfs->xGetSystemCall == 0 || vfs->xSetSystemCall == 0) return;
    sqlite3_syscall_ptr real = vfs->xGetSystemCall(vfs, "fchown");
    if (real == 0) return;
    countdown_real_fchown = (countdown_fchown_fn)real;
    countdown_fchown_result = vfs->xSetSystemCall(vfs, "fchown", (sqlite3_syscall_ptr)countdown_needful_fchown);
}

int countdown_skip_needless_fchown(void) {
    pthread_once(&countdown_fchown_once, countdown_install_fchown);
    return countdown_fchown_result;
}

// SQLite counts the memory it allocates for `sqlite3_memory_used` and the heap limits, under a
// mutex of the whole process, at every allocation, and it allocates several times a statement:
// that mutex alone was a tenth of a group commit's time. The setting can only change before
// SQLite is first used in the process; once it is, SQLite refuses the change and keeps counting.

static pthread_once_t countdown_memstatus_once = PTHREAD_ONCE_INIT;
static int countdown_memstatus_result = SQLITE_MISUSE;

static void countdown_stop_memstatus(void) {
    countdown_memstatus_result = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int countdown_skip_memory_statistics(void) {
    pthread_once(&countdown_memstatus_once, countdown_stop_memstatus);
    return countdown_memstatus_result;
}

// Writers waiting, as other processes see them. SQLite's write lock is a byte of the `-shm` file
// that a writer takes without waiting, retrying after a sleep while it is busy: nobody queues, and
// a writer that sleeps through the short gaps between a busy ticker's batches can miss one gap
// after another. So a store's writer that finds the lock busy says so while it waits, with a
// shared lock on a byte of the `-shm` file that SQLite does not use (its locks are bytes 120 to
// 128), and a ticker between two batches looks for that lock and lets the waiting writers in
// before it takes the next (for a bounded time). The locks are open file description locks
// (Linux): they belong to a descriptor of our own, and closing it would take none of SQLite's
// own locks of this process with it. That descriptor stays open for the process's life, one for
// each `-shm` file (opened again only if the file at that path was replaced); elsewhere this
// does nothing.

#define COUNTDOWN_WAITING_BYTE 136

struct countdown_shm_file {
    /// The database file's name, as SQLite gives it: the `-shm` file is this with `-shm` after it.
    char *database;
    int fd;
    dev_t device;
    ino_t inode;
    struct countdown_shm_file *next;
};

static pthread_mutex_t countdown_shm_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct countdown_shm_file *countdown_shm_files = 0;

#ifdef F_OFD_SETLK
/// Under the mutex: the descriptor of the `-shm` file now at the path of `database`'s, opened
/// (and kept in `file`, or in a new entry when `file` is null) unless `file` holds that one
/// already; -1 when there is none.
static int countdown_shm_current(struct countdown_shm_file *file, const char *database) {
    size_t length = strlen(database);
    char *path = malloc(length + 5);
    if (path == 0) return -1;
    memcpy(path, database, length);
    memcpy(path + length, "-shm", 5);
    struct stat now;
    int fd = -1;
    if (stat(path, &now) != 0) {
        fd = -1;
    } else if (file != 0 && file->device == now.st_dev && file->inode == now.st_ino) {
        fd = file->fd;
    } else {
        fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        struct stat opened;
        if (fd >= 0 && (fstat(fd, &opened) != 0 || opened.st_dev != now.st_dev || opened.st_ino != now.st_ino)) {
            close(fd);
            fd = -1;
        }
        if (fd >= 0 && file == 0) {
            file = calloc(1, sizeof(struct countdown_shm_file));
            char *name = strdup(database);
            if (file == 0 || name == 0) {
                free(file);
                free(name);
                close(fd);
                fd = -1;
            } else {
                file->database = name;
                file->fd = -1;
                file->next = countdown_shm_files;
                countdown_shm_files = file;
            }
        }
        if (fd >= 0) {
            // A file opened before was replaced (every connection had closed it): the old one
            // holds no lock of SQLite's in this process any more.
            if (file->fd >= 0) close(file->fd);
            file->fd = fd;
            file->device = opened.st_dev;
            file->inode = opened.st_ino;
        }
    }
    free(path);
    return fd;
}
#endif

/// A descriptor of `db`'s `-shm` file, or -1 (none, or no open file description locks here).
/// `verify`: whether to check that the file at the path is still the one opened (one stat more);
/// without it, a file opened before is taken as it is, with no allocation and no system call.
static int countdown_shm_fd(sqlite3 *db, int verify) {
#ifdef F_OFD_SETLK
    const char *database = sqlite3_db_filename(db, "main");
    if (database == 0 || database[0] == 0) return -1;
    pthread_mutex_lock(&countdown_shm_mutex);
    struct countdown_shm_file *file = countdown_shm_files;
    while (file != 0 && strcmp(file->database, database) != 0) file = file->next;
    int fd = file != 0 && !verify ? file->fd : countdown_shm_current(file, database);
    pthread_mutex_unlock(&countdown_shm_mutex);
    return fd;
#else
    (void)db;
    (void)verify;
    return -1;
#endif
}

#ifdef F_OFD_SETLK
/// The waiting byte, as `fcntl` takes it, for a lock of `type`.
static struct flock countdown_waiting_byte(short type) {
    struct flock lock;
    memset(&lock, 0, sizeof lock);
    lock.l_type = type;
    lock.l_whence = SEEK_SET;
    lock.l_start = COUNTDOWN_WAITING_BYTE;
    lock.l_len = 1;
    return lock;
}
#endif

int countdown_writer_waits(sqlite3 *db, int waits) {
#ifdef F_OFD_SETLK
    int fd = countdown_shm_fd(db, waits);
    if (fd < 0) return 0;
    struct flock lock = countdown_waiting_byte(waits ? F_RDLCK : F_UNLCK);
    return fcntl(fd, F_OFD_SETLK, &lock) == 0;
#else
    (void)db;
    (void)waits;
    return 0;
#endif
}

int countdown_writers_waiting(sqlite3 *db, int verify) {
#ifdef F_OFD_SETLK
    int fd = countdown_shm_fd(db, verify);
    if (fd < 0) return 0;
    struct flock lock = countdown_waiting_byte(F_WRLCK);
    if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return 0;
    return lock.l_type != F_UNLCK;
#else
    (void)db;
    (void)verify;
    return 0;
#endif
}
