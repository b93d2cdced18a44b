// Package tasks keeps the tasks of the MCP Tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663): each task's state machine
// (working, input_required and back while the call asks the client, then
// completed, failed or cancelled, never again), its owner,
// its time to live, the cancel of the call it stands for and, once
// completed, the id of the run whose result is the task's (the run
// registry keeps that result; a task keeps the answer itself only for a
// call that ran no run).
//
// It owns no wire format and knows no MCP transport: internal/mcpserver
// turns tasks/get, tasks/cancel and task-augmented tools/call into calls
// here. Tasks live behind the small Store interface: Memory in this
// process, or Disk in the run store (internal/runstore), where they
// outlive it.
package tasks
