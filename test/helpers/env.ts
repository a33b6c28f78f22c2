// Imported first by every test: throw-away clusters skip fsync (initdb
// --no-sync) and logs stay quiet unless a test asks for them.
process.env.NODE_ENV ??= "test";
process.env.LOG_LEVEL ??= "warn";
export {};
