// `import CountdownStore` gives a host the whole store on SQLite in one line: the engine-neutral
// core (the `CountdownStore` type, its model, time model, queries, events and ticker) and the
// SQLite engine that opens a file or a host's GRDB database.
@_exported import CountdownStoreCore
@_exported import CountdownStoreSQLite
