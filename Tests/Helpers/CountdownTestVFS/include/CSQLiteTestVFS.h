#ifndef CSQLITETESTVFS_H
#define CSQLITETESTVFS_H

/// Registers the "countdown-test" VFS, which wraps the current default VFS, as the new default
/// for every connection this process opens from now on. Idempotent. Returns an SQLite result code.
int countdown_testvfs_register(void);

/// Simulated power loss: at the `operations`-th write, truncate or sync from now (of a main
/// database, WAL or rollback journal), the VFS forgets every write not yet synced, lets a seeded
/// prefix of the write under way land (a torn write; a sync or truncate does not happen), and the
/// process sends itself SIGKILL. 0 disarms.
void countdown_testvfs_power_loss_after(long operations, unsigned long long seed);

/// Kills the process (SIGKILL to itself) at the `n`-th write to a main database file from now
/// (1 = the next), once the first half of that write has landed. 0 disarms.
void countdown_testvfs_kill_at_db_write(long n);

/// Writes to main database files so far, in this process.
long countdown_testvfs_db_writes(void);

/// Writes, truncates and syncs counted toward a power loss so far, in this process.
long countdown_testvfs_operations(void);

#endif
