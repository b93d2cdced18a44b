package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/internal/runstore"
	"github.com/runbox-mcp/runbox/internal/tasks"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs/inflight"
	"github.com/runbox-mcp/runbox/tools"
)

// The Tasks extension (io.modelcontextprotocol/tasks, SEP-2663, protocol
// 2026-07-28) served as a layer in front of mcp-go, which has only the
// 2025-11-25 draft: a tools/call of run_code or a saved tool whose
// request declares the extension is answered at once with a task, and
// the call itself goes on to mcp-go with an id of the layer's own, on the
// same transport path as any call (so the result is today's, byte for
// byte). A call that ran a run leaves its result in the run registry
// (runs/inflight), the task naming the run, and tasks/get renders it from
// there as the call answered it; the layer keeps only the answer of a call
// that ran none. tasks/cancel cancels that call (the box is killed as for
// any cancelled call).
const (
	// ExtensionTasks is the extension's identifier.
	ExtensionTasks = "io.modelcontextprotocol/tasks"

	methodTasksGet    = "tasks/get"
	methodTasksUpdate = "tasks/update"
	methodTasksCancel = "tasks/cancel"

	// taskIDPrefix marks the JSON-RPC id (and progress token) of a
	// task's call as the layer hands it to mcp-go.
	taskIDPrefix = tools.TaskCallPrefix

	// taskPollInterval is the polling interval suggested to clients.
	taskPollInterval = time.Second

	// The store's bounds: tasks, and bytes of results kept.
	maxTasks     = 1024
	maxTaskBytes = 64 << 20
)

// taskLayer serves the extension for one MCPServer.
type taskLayer struct {
	s     *server.MCPServer
	tasks *tasks.Tasks
	// builtins are the tools registered before the saved ones: of them
	// only run_code runs as a task.
	builtins map[string]bool

	// answered holds, by task id, a channel closed when the task's call
	// answers (on stdio, where a cancel is said until then).
	answered sync.Map
	// calls holds, by task id, the task's call (taskCall) while it may
	// be made again.
	calls sync.Map

	logger *slog.Logger

	// disk keeps the tasks in the run store, so that they outlive the
	// process (nil: in memory); holds has, by task id, the release of
	// the store's hold of a task whose call runs (or is adopted) here.
	disk  *tasks.Disk
	holds sync.Map
	// runs keeps the tasks' runs and their results, and finishes the
	// task of a server that stopped.
	runs taskRuns
	// info is the server as its results name it (implementation).
	info mcp.Implementation

	// base ends every task's call when the server stops.
	base context.Context
	stop context.CancelFunc
}

// sweepEvery is how often expired tasks are dropped (and a task whose
// run outlived its TTL cancelled) when no new task does it.
const sweepEvery = time.Minute

// taskRuns is the run registry as the task layer sees it (tools.Deps).
type taskRuns interface {
	// AdoptTask finishes the task of a server that stopped: the answer
	// of its call, once its run ends.
	AdoptTask(ctx context.Context, taskID string) *mcp.CallToolResult
	// TaskRun names the ended run of a task's call, which keeps the
	// task's result; false for a call that ran none.
	TaskRun(taskID string) (runID string, ok bool)
	// TaskAnswer renders the result of a task's run as its call answered
	// it.
	TaskAnswer(ctx context.Context, taskID string, contentOnly bool) *mcp.CallToolResult
}

func newTaskLayer(s *server.MCPServer, m *manifest.Manifest, builtins map[string]bool, logger *slog.Logger, runs *runstore.Store, reg taskRuns, info mcp.Implementation) *taskLayer {
	ttl := inflight.TaskTTL(m)
	base, stop := context.WithCancel(context.Background())
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var store tasks.Store = tasks.NewMemory(maxTasks, maxTaskBytes)
	var disk *tasks.Disk
	if runs != nil {
		disk = tasks.NewDisk(runs)
		store = disk
	}
	l := &taskLayer{s: s, tasks: tasks.New(store, ttl), builtins: builtins, base: base, stop: stop, logger: logger, disk: disk, runs: reg, info: info}
	go func() {
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-base.Done():
				return
			case <-t.C:
				l.tasks.Sweep()
				l.calls.Range(func(id, _ any) bool {
					if !l.tasks.Has(id.(string)) {
						l.calls.Delete(id)
						l.unhold(id.(string))
					}
					return true
				})
			}
		}
	}()
	return l
}

// close ends every task's call that runs here.
func (l *taskLayer) close() { l.stop() }

// rpcMessage is a JSON-RPC message as the layer reads it.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// requestMeta is what the layer reads of a request's params.
type requestMeta struct {
	Name   string `json:"name"`
	TaskID string `json:"taskId"`
	Meta   struct {
		ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
		Capabilities    struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"io.modelcontextprotocol/clientCapabilities"`
	} `json:"_meta"`
}

// declares reports whether a request of protocol 2026-07-28 or later
// declares the extension in its per-request capabilities: the extension
// is not defined for earlier versions.
func (p requestMeta) declares() bool {
	ext, ok := p.Meta.Capabilities.Extensions[ExtensionTasks]
	return ok && mcp.IsModernProtocol(p.Meta.ProtocolVersion) && len(ext) > 0 && ext[0] == '{'
}

// modern reports whether the request is of protocol 2026-07-28 or later.
func (p requestMeta) modern() bool { return mcp.IsModernProtocol(p.Meta.ProtocolVersion) }

// eligible reports whether a tool's calls run as tasks: run_code and the
// saved tools, whose calls run code in a box.
func (l *taskLayer) eligible(name string) bool {
	if name == tools.RunCodeName {
		return true
	}
	if l.builtins[name] {
		return false
	}
	_, ok := l.s.ListTools()[name]
	return ok
}

// classify reads a client's message: a task-augmented call (its params),
// a tasks/* request of the extension, or anything else (ok false).
func (l *taskLayer) classify(msg []byte) (req rpcMessage, p requestMeta, ok bool) {
	// A call's params are read in place: its arguments, which may be
	// most of a large body, are not copied.
	var call struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params *requestMeta    `json:"params"`
	}
	call.Params = &p
	if json.Unmarshal(msg, &call) != nil || len(call.ID) == 0 || call.ID[0] == 'n' {
		return req, p, false
	}
	req.JSONRPC, req.ID, req.Method = mcp.JSONRPC_VERSION, call.ID, call.Method
	if req.Method != string(mcp.MethodToolsCall) && json.Unmarshal(msg, &req) != nil {
		return req, p, false
	}
	switch req.Method {
	case string(mcp.MethodToolsCall):
		if !p.declares() || !l.eligible(p.Name) {
			return req, p, false
		}
	case methodTasksGet, methodTasksCancel, methodTasksUpdate:
		if json.Unmarshal(req.Params, &p) != nil || !p.modern() {
			return req, p, false
		}
	case string(mcp.MethodSubscriptionsListen):
		// Task status notifications are asked for by task id; a client
		// that asks without declaring the extension is refused (-32021).
		// runbox sends none (the extension makes them optional), so any
		// other listen is mcp-go's, which acknowledges no task ids.
		var listen struct {
			Notifications struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
		}
		if json.Unmarshal(req.Params, &p) != nil || json.Unmarshal(req.Params, &listen) != nil ||
			!p.modern() || p.declares() || len(listen.Notifications.TaskIDs) == 0 {
			return req, p, false
		}
	default:
		return req, p, false
	}
	return req, p, true
}

// innerCall rewrites a task's tools/call for mcp-go: its id, and its
// progress token (so the run's progress updates the task), become the
// layer's own; everything else is the client's request as sent. The
// call made again after tasks/update also carries the client's answers
// and the call's request state (a multi round-trip request's retry).
// The call's arguments, most of a large call, are copied once, into the
// new message.
func innerCall(msg []byte, taskID string, inputResponses, requestState json.RawMessage) ([]byte, error) {
	var m, params map[string]inPlace
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(m["params"], &params); err != nil {
		return nil, err
	}
	if params == nil {
		params = map[string]inPlace{}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, err
		}
	}
	inner, _ := json.Marshal(taskIDPrefix + taskID)
	meta["progressToken"] = inner
	params["_meta"], _ = json.Marshal(meta)
	if len(inputResponses) > 0 {
		params["inputResponses"] = inPlace(inputResponses)
	}
	if len(requestState) > 0 {
		params["requestState"] = inPlace(requestState)
	}
	m["id"] = inner
	delete(m, "params")
	var b bytes.Buffer
	b.Grow(len(msg) + len(params["_meta"]) + len(inputResponses) + len(requestState) + 64)
	writeObject(&b, m, "params", params)
	return b.Bytes(), nil
}

// inPlace is a JSON value as a slice of the message it was read from,
// not a copy.
type inPlace []byte

func (v *inPlace) UnmarshalJSON(b []byte) error {
	*v = b
	return nil
}

// writeObject writes fields, and the object nested under nestedKey, as
// one JSON object with sorted keys.
func writeObject(b *bytes.Buffer, fields map[string]inPlace, nestedKey string, nested map[string]inPlace) {
	keys := slices.Sorted(maps.Keys(fields))
	if nested != nil {
		keys = append(keys, nestedKey)
	}
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(k)
		b.Write(name)
		b.WriteByte(':')
		if nested != nil && i == len(keys)-1 {
			writeObject(b, nested, "", nil)
			continue
		}
		b.Write(fields[k])
	}
	b.WriteByte('}')
}

// taskOfInner returns the task id of an inner call's id or progress
// token, or "".
func taskOfInner(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	id, ok := strings.CutPrefix(s, taskIDPrefix)
	if !ok {
		return ""
	}
	return id
}

// fromMCP takes one message mcp-go sent about a task's call: its
// progress (the task's status message) or its answer (the task's end).
// It reports whether the message was the layer's, which the client must
// not see, and whether it was the call's answer. only, when set, is the
// one task whose messages are expected.
func (l *taskLayer) fromMCP(msg []byte, only string) (ours, answer bool) {
	var m rpcMessage
	if len(msg) == 0 || !bytes.Contains(msg, []byte(taskIDPrefix)) || json.Unmarshal(msg, &m) != nil {
		return false, false
	}
	if m.Method == string(mcp.MethodNotificationProgress) {
		var p struct {
			Token   json.RawMessage `json:"progressToken"`
			Message string          `json:"message"`
		}
		if json.Unmarshal(m.Params, &p) != nil {
			return false, false
		}
		id := taskOfInner(p.Token)
		if id == "" || (only != "" && id != only) || !l.tasks.Has(id) {
			return false, false
		}
		l.tasks.Progress(id, p.Message)
		return true, false
	}
	id := taskOfInner(m.ID)
	if id == "" || m.Method != "" || (only != "" && id != only) || !l.tasks.Has(id) {
		return false, false
	}
	if ch, ok := l.answered.LoadAndDelete(id); ok {
		close(ch.(chan struct{}))
	}
	l.finish(id, m)
	if t, ok := l.tasks.Peek(id); ok {
		l.logger.Info("task", "task", logID(id), "tool", t.Tool, "status", t.Status, "ms", time.Since(t.Created).Milliseconds())
		if t.Status.Terminal() {
			l.calls.Delete(id)
			l.unhold(id)
		}
	}
	return true, true
}

// finish ends a task with its call's answer.
func (l *taskLayer) finish(id string, m rpcMessage) {
	if len(m.Error) > 0 {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(m.Error, &e)
		l.tasks.Fail(id, m.Error, e.Message)
		return
	}
	if len(m.Result) == 0 {
		l.failInternal(id, "the call ended without an answer")
		return
	}
	// A call that asks the client first (an approval) answers with input
	// requests: the task waits for them (tasks/get shows them, tasks/update
	// answers them and the call is made again).
	var r struct {
		ResultType    string          `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  json.RawMessage `json:"requestState"`
	}
	if json.Unmarshal(m.Result, &r) == nil && r.ResultType == string(mcp.ResultTypeInputRequired) {
		l.tasks.NeedInput(id, r.InputRequests, r.RequestState)
		return
	}
	l.complete(id, m.Result)
}

// complete ends a task with its call's answer: the name of the run that
// keeps its result, or the answer itself when the call ran no run.
func (l *taskLayer) complete(id string, result json.RawMessage) {
	if l.runs != nil {
		if runID, ok := l.runs.TaskRun(id); ok {
			var shape struct {
				Structured json.RawMessage `json:"structuredContent"`
			}
			_ = json.Unmarshal(result, &shape)
			l.tasks.CompleteRun(id, runID, len(shape.Structured) == 0)
			return
		}
	}
	l.tasks.Complete(id, result)
}

// result is a completed task's result as its call answered it: rendered
// from its run's, or kept.
func (l *taskLayer) result(t tasks.Task) json.RawMessage {
	if t.RunID == "" || l.runs == nil {
		return t.Result
	}
	out := l.runs.TaskAnswer(l.base, t.ID, t.ContentOnly)
	// As mcp-go stamps every result of protocol 2026-07-28.
	out.ResultType = mcp.ResultTypeComplete
	out.EnsureResultMeta().SetServerInfo(l.info)
	raw, err := json.Marshal(out)
	if err != nil {
		raw, _ = json.Marshal(mcp.NewToolResultError("the task's result could not be encoded"))
	}
	return raw
}

func (l *taskLayer) failInternal(id, message string) {
	e, _ := json.Marshal(map[string]any{"code": mcp.INTERNAL_ERROR, "message": message})
	l.tasks.Fail(id, e, message)
	l.unhold(id)
}

// hold takes the store's hold of task id for this process.
func (l *taskLayer) hold(id string) bool {
	if l.disk == nil {
		return false
	}
	release, ok := l.disk.Hold(id)
	if ok {
		l.holds.Store(id, release)
	}
	return ok
}

// unhold gives up the store's hold of task id: its call is over here.
func (l *taskLayer) unhold(id string) {
	if r, ok := l.holds.LoadAndDelete(id); ok {
		r.(func())()
	}
}

// resumeOrphan adopts owner's task id if its server stopped (the task is
// in the store, unfinished, and no live server holds it): its run is
// found again and the task finished with its result; a task that waited
// for the client's answer cannot be made again and fails, saying so.
func (l *taskLayer) resumeOrphan(owner, id string) {
	if l.disk == nil {
		return
	}
	if _, here := l.calls.Load(id); here {
		return
	}
	if _, here := l.holds.Load(id); here {
		return
	}
	t, err := l.tasks.Get(owner, id)
	if err != nil || t.Status.Terminal() || !l.hold(id) {
		return
	}
	if t.Status == tasks.InputRequired || l.runs == nil {
		l.failInternal(id, "the task's server stopped while the task waited for the client's answer: call the tool again")
		return
	}
	ctx, cancel := context.WithCancel(l.base)
	l.tasks.SetCancel(id, cancel)
	l.logger.Info("task adopted", "task", logID(id), "tool", t.Tool)
	go func() {
		defer cancel()
		out := l.runs.AdoptTask(ctx, id)
		if raw, err := json.Marshal(out); err == nil {
			l.complete(id, raw)
		} else {
			l.failInternal(id, "the adopted task's result could not be encoded")
		}
		l.unhold(id)
		if t, ok := l.tasks.Peek(id); ok {
			l.logger.Info("task", "task", logID(id), "tool", t.Tool, "status", t.Status, "ms", time.Since(t.Created).Milliseconds())
		}
	}()
}

// sendFunc hands a task's call (as innerCall wrote it) to mcp-go on the
// transport the task came by, and returns the call's cancel.
type sendFunc func(taskID string, inner []byte) (context.CancelFunc, error)

// taskCall is what it takes to make a task's call again: the client's
// request and the way to mcp-go.
type taskCall struct {
	msg  []byte
	send sendFunc
}

// start makes the task of a client's tools/call msg and hands the call
// to mcp-go; nil when the store is full (the call is then answered as a
// plain call: the server decides).
func (l *taskLayer) start(owner, tool string, msg []byte, send sendFunc) *tasks.Task {
	t, err := l.tasks.Create(owner, tool, nil)
	if err != nil {
		l.logger.Warn("task refused: the call runs as a plain call", "tool", tool, "err", err)
		return nil
	}
	l.logger.Info("task", "task", logID(t.ID), "tool", tool, "status", t.Status)
	l.hold(t.ID)
	l.calls.Store(t.ID, taskCall{msg: msg, send: send})
	l.call(t.ID, nil, nil)
	return &t
}

// call makes task id's call, with the client's answers on a retry.
func (l *taskLayer) call(id string, inputResponses, requestState json.RawMessage) {
	c, ok := l.calls.Load(id)
	if !ok {
		l.failInternal(id, errTaskCall.Error())
		return
	}
	tc := c.(taskCall)
	inner, err := innerCall(tc.msg, id, inputResponses, requestState)
	var cancel context.CancelFunc
	if err == nil {
		cancel, err = tc.send(id, inner)
	}
	if err != nil {
		l.failInternal(id, errTaskCall.Error())
		return
	}
	l.tasks.SetCancel(id, cancel)
}

// taskWire is a Task as the extension shows it.
func taskWire(t tasks.Task, resultType string, detailed bool) map[string]any {
	w := map[string]any{
		"taskId":         t.ID,
		"status":         string(t.Status),
		"createdAt":      t.Created.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt":  t.Updated.UTC().Format(time.RFC3339Nano),
		"ttlMs":          t.TTL.Milliseconds(),
		"pollIntervalMs": taskPollInterval.Milliseconds(),
	}
	if resultType != "" {
		w["resultType"] = resultType
	}
	if t.Message != "" {
		w["statusMessage"] = t.Message
	}
	if detailed {
		switch t.Status {
		case tasks.Completed:
			w["result"] = t.Result
		case tasks.Failed:
			w["error"] = t.Error
		case tasks.InputRequired:
			w["inputRequests"] = t.InputRequests
		}
	}
	return w
}

// createdAnswer is the CreateTaskResult answering a task's tools/call.
func createdAnswer(id json.RawMessage, t tasks.Task) []byte {
	return rpcResult(id, taskWire(t, "task", false))
}

// answer serves tasks/get, tasks/update and tasks/cancel of owner. It
// returns the JSON-RPC response and its error code (0 for a result).
func (l *taskLayer) answer(owner string, req rpcMessage, p requestMeta) ([]byte, int) {
	if !p.declares() {
		return rpcError(req.ID, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability",
			map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionTasks: map[string]any{}}}}), mcp.MISSING_REQUIRED_CLIENT_CAPABILITY
	}
	if p.TaskID == "" {
		return rpcError(req.ID, mcp.INVALID_PARAMS, "taskId is required", nil), mcp.INVALID_PARAMS
	}
	notFound := func(verb string) ([]byte, int) {
		return rpcError(req.ID, mcp.INVALID_PARAMS, "Failed to "+verb+" task: Task not found", nil), mcp.INVALID_PARAMS
	}
	l.resumeOrphan(owner, p.TaskID)
	switch req.Method {
	case methodTasksGet:
		t, err := l.tasks.Get(owner, p.TaskID)
		if err != nil {
			return notFound("retrieve")
		}
		if t.Status == tasks.Completed {
			t.Result = l.result(t)
		}
		return rpcResult(req.ID, taskWire(t, "complete", true)), 0
	case methodTasksCancel:
		if err := l.tasks.Cancel(owner, p.TaskID); err != nil {
			return notFound("cancel")
		}
		l.calls.Delete(p.TaskID)
		l.unhold(p.TaskID)
		return rpcResult(req.ID, map[string]any{"resultType": "complete"}), 0
	default: // tasks/update
		var up struct {
			InputResponses json.RawMessage `json:"inputResponses"`
		}
		_ = json.Unmarshal(req.Params, &up)
		was, resumed, err := l.tasks.Resume(owner, p.TaskID)
		if err != nil {
			return notFound("update")
		}
		// Answers to a task not waiting for any are ignored.
		if resumed {
			l.call(p.TaskID, up.InputResponses, was.RequestState)
		}
		return rpcResult(req.ID, map[string]any{"resultType": "complete"}), 0
	}
}

func rpcResult(id json.RawMessage, result any) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "result": result})
	if err != nil {
		return rpcError(id, mcp.INTERNAL_ERROR, fmt.Sprintf("encoding the answer: %v", err), nil)
	}
	return b
}

func rpcError(id json.RawMessage, code int, message string, data any) []byte {
	e := map[string]any{"code": code, "message": message}
	if data != nil {
		e["data"] = data
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "error": e})
	return b
}

// logID is the head of a task id, enough to follow a task in the log and
// too little to use it (a task id is its owner's handle).
func logID(id string) string { return id[:min(len(id), 6)] }

// errTaskCall is a task's call that never reached mcp-go.
var errTaskCall = errors.New("the task's call could not be started")
