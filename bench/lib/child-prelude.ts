/**
 * Imported first by the target servers. They are started with `node --import
 * tsx` (so the bench stays TypeScript), and tsx turns on source-mapped stack
 * traces for the whole process; a production `node dist/server.js` has them
 * off, and mapping stacks costs CPU whenever an Error's stack is read. Turn
 * them off again so both targets run the request path as production does.
 */
process.setSourceMapsEnabled(false);
export {};
