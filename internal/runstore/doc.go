// Package runstore keeps the long runs' records and results, and the MCP
// tasks, in the state directory so that they outlive the server process (a
// restarted server answers for a run it did not start): a file per record,
// written atomically (a temporary file renamed over it), bounded in count
// and bytes, finished records kept for the declared time and dropped oldest
// first.
//
// Several servers may share one directory (two stdio servers of one
// user): each writes only the records it made or adopted, and a record's
// lock (an advisory file lock, released by the kernel when its process
// dies, even by kill -9) says whether a live server holds the record's
// run; a record nobody holds is free to be adopted.
//
// It knows nothing of MCP, boxes or tasks: an Entry's data is the
// caller's JSON.
package runstore
