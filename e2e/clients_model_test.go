//go:build e2e

package e2e

// A scripted model on 127.0.0.1 for the agent clients (clients_test.go). It
// speaks each client's own wire format: Anthropic Messages (Claude Code,
// opencode), OpenAI Responses (Codex) and Gemini's generateContent (Gemini
// CLI), streaming where the client asks. Its script is a list of tool
// calls: a request of the conversation that carries k tool results is
// answered with call k (or, past the last, a final text), and the k-th
// result, exactly as the client put it in the request, is recorded.
//
// The turn is read from the request itself, not counted by the server, so a
// client's retry or side request (a title, a token count, a next-speaker
// check) neither skips nor repeats a call.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// toolCall is one call the model makes: a runbox tool (as runbox names it)
// and its arguments. An argument "$SESSION" is replaced by the last session
// id a result so far named.
type toolCall struct {
	Tool string
	Args map[string]any
}

type scriptedModel struct {
	t      testing.TB
	script []toolCall
	addr   string
	srv    *http.Server

	mu      sync.Mutex
	results map[int]seenResult
	// offered is the tool names of the last conversation request.
	offered []string
	// unknown is a tool the script wanted that the client did not offer.
	unknown string
	// without is the tools of a request that offered none of runbox's.
	without  []string
	requests []string
}

func startModel(t testing.TB, script []toolCall) *scriptedModel {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &scriptedModel{t: t, script: script, addr: l.Addr().String(), results: map[int]seenResult{}}
	m.srv = &http.Server{Handler: m}
	go func() { _ = m.srv.Serve(l) }()
	t.Cleanup(func() { _ = m.srv.Close() })
	return m
}

func (m *scriptedModel) url() string { return "http://" + m.addr }

func (m *scriptedModel) result(k int) (seenResult, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[k]
	return r, ok
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.requests = append(m.requests, r.Method+" "+r.URL.Path)
	n := len(m.requests)
	m.mu.Unlock()
	// RUNBOX_CLIENTS_DUMP keeps every request a client made, to read.
	if d := os.Getenv("RUNBOX_CLIENTS_DUMP"); d != "" {
		_ = os.MkdirAll(d, 0o755)
		_ = os.WriteFile(filepath.Join(d, fmt.Sprintf("%s-%02d.json", strings.ReplaceAll(m.t.Name(), "/", "_"), n)),
			append([]byte(r.Method+" "+r.URL.String()+"\n"), body...), 0o644)
	}
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/messages/count_tokens"):
		writeJSON(w, map[string]any{"input_tokens": 100})
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/messages"):
		m.anthropic(w, body)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/responses"):
		m.responses(w, body)
	case r.Method == http.MethodPost && strings.Contains(p, ":countTokens"):
		writeJSON(w, map[string]any{"totalTokens": 100})
	case r.Method == http.MethodPost && (strings.Contains(p, ":generateContent") || strings.Contains(p, ":streamGenerateContent")):
		m.gemini(w, body, strings.Contains(p, ":streamGenerateContent"))
	case r.Method == http.MethodGet && strings.HasSuffix(p, "/models"):
		writeJSON(w, map[string]any{"data": []any{}, "models": []any{}})
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// turn records result k-1 (when k > 0) and returns what to answer: call k
// under the client's name for it, or "" for the final text. offered is the
// request's tools; a request offering none of runbox's is a side request
// and gets side=true.
func (m *scriptedModel) turn(offered []string, results []seenResult) (name string, args map[string]any, side bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.ContainsFunc(offered, func(n string) bool { return strings.Contains(n, "run_code") }) {
		if len(offered) > 0 {
			m.without = offered
		}
		return "", nil, true
	}
	m.offered = offered
	k := len(results)
	if k > 0 {
		m.results[k-1] = results[k-1]
	}
	if k >= len(m.script) {
		return "", nil, false
	}
	c := m.script[k]
	name = clientToolName(offered, c.Tool)
	if name == "" {
		m.unknown = c.Tool
		return "", nil, false
	}
	args = map[string]any{}
	for key, v := range c.Args {
		if v == "$SESSION" {
			v = lastSession(results)
		}
		args[key] = v
	}
	return name, args, false
}

// clientToolName is the client's name for runbox's tool: the name itself
// or one that ends in it after a separator and names the server.
func clientToolName(offered []string, tool string) string {
	for _, n := range offered {
		if n == tool {
			return n
		}
	}
	for _, n := range offered {
		if strings.HasSuffix(n, tool) && strings.Contains(n, "runbox") {
			return n
		}
	}
	return ""
}

var sessionID = regexp.MustCompile(`s_[0-9A-Za-z_-]{6,}`)

func lastSession(results []seenResult) string {
	for i := len(results) - 1; i >= 0; i-- {
		if id := sessionID.FindString(results[i].Text()); id != "" {
			return id
		}
	}
	return "s_none_seen"
}

const finalText = "Done: the scripted model has no more calls."

// sse writes one server-sent event (name may be empty) and flushes.
func sse(w http.ResponseWriter, name string, v any) {
	b, _ := json.Marshal(v)
	if name != "" {
		fmt.Fprintf(w, "event: %s\n", name)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// --- Anthropic Messages ---

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Content   json.RawMessage `json:"content"`
	ToolUseID string          `json:"tool_use_id"`
}

func (m *scriptedModel) anthropic(w http.ResponseWriter, body []byte) {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var offered []string
	for _, t := range req.Tools {
		offered = append(offered, t.Name)
	}
	var results []seenResult
	for _, msg := range req.Messages {
		var blocks []anthropicBlock
		if json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			var s seenResult
			var text string
			if json.Unmarshal(b.Content, &text) == nil {
				s.Texts = append(s.Texts, text)
			} else {
				var parts []anthropicBlock
				_ = json.Unmarshal(b.Content, &parts)
				for _, p := range parts {
					switch p.Type {
					case "text":
						s.Texts = append(s.Texts, p.Text)
					case "image":
						s.Images++
					}
				}
			}
			results = append(results, s)
		}
	}
	name, args, side := m.turn(offered, results)
	id := fmt.Sprintf("msg_%d", len(results))
	var content []map[string]any
	stop := "end_turn"
	switch {
	case side:
		content = []map[string]any{{"type": "text", "text": "Scripted side answer."}}
	case name == "":
		content = []map[string]any{{"type": "text", "text": finalText}}
	default:
		content = []map[string]any{{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", len(results)), "name": name, "input": args}}
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": 100, "output_tokens": 10}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	sseHeaders(w)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	for i, c := range content {
		if c["type"] == "text" {
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": c["text"]}})
		} else {
			in, _ := json.Marshal(c["input"])
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// --- OpenAI Responses ---

func (m *scriptedModel) responses(w http.ResponseWriter, body []byte) {
	var req struct {
		Model  string            `json:"model"`
		Stream bool              `json:"stream"`
		Input  []json.RawMessage `json:"input"`
		Tools  []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	offered := responsesToolNames(req.Tools)
	var results []seenResult
	for _, raw := range req.Input {
		var item struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal(raw, &item) != nil || !strings.HasSuffix(item.Type, "call_output") {
			continue
		}
		var s seenResult
		var text string
		if json.Unmarshal(item.Output, &text) == nil {
			s.Texts = append(s.Texts, text)
		} else {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			_ = json.Unmarshal(item.Output, &parts)
			for _, p := range parts {
				switch {
				case strings.Contains(p.Type, "text"):
					s.Texts = append(s.Texts, p.Text)
				case strings.Contains(p.Type, "image"):
					s.Images++
				}
			}
		}
		results = append(results, s)
	}
	name, args, side := m.turn(offered, results)
	rid := fmt.Sprintf("resp_%d", len(results))
	var item map[string]any
	switch {
	case side || name == "":
		text := finalText
		if side {
			text = "Scripted side answer."
		}
		item = map[string]any{"type": "message", "id": "msg_" + rid, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	default:
		a, _ := json.Marshal(args)
		ns, fn := splitNamespace(name)
		item = map[string]any{"type": "function_call", "id": "fc_" + rid, "call_id": fmt.Sprintf("call_%d", len(results)),
			"name": fn, "arguments": string(a), "status": "completed"}
		if ns != "" {
			item["namespace"] = ns
		}
	}
	resp := map[string]any{"id": rid, "object": "response", "status": "completed", "model": req.Model, "output": []any{item},
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 10, "total_tokens": 110,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}}
	if !req.Stream {
		writeJSON(w, resp)
		return
	}
	sseHeaders(w)
	created := map[string]any{"id": rid, "object": "response", "status": "in_progress", "model": req.Model, "output": []any{}}
	sse(w, "response.created", map[string]any{"type": "response.created", "response": created})
	sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": resp})
}

// responsesToolNames lists the function tools of a Responses request,
// those inside a namespace as namespace/name.
func responsesToolNames(tools []json.RawMessage) []string {
	var names []string
	for _, raw := range tools {
		var t struct {
			Type  string            `json:"type"`
			Name  string            `json:"name"`
			Tools []json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		if len(t.Tools) > 0 {
			for _, n := range responsesToolNames(t.Tools) {
				names = append(names, t.Name+"/"+n)
			}
			continue
		}
		if t.Name != "" {
			names = append(names, t.Name)
		}
	}
	return names
}

func splitNamespace(name string) (ns, fn string) {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// --- Gemini generateContent ---

type geminiPart struct {
	Text             string                     `json:"text"`
	InlineData       *struct{ MimeType string } `json:"inlineData"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
		Parts    []geminiPart    `json:"parts"`
	} `json:"functionResponse"`
}

func (m *scriptedModel) gemini(w http.ResponseWriter, body []byte, stream bool) {
	var req struct {
		Contents []struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			ResponseMimeType string `json:"responseMimeType"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var offered []string
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			offered = append(offered, d.Name)
		}
	}
	// A function response and the parts after it in the same content (where
	// Gemini CLI puts a result's images) make one result.
	var results []seenResult
	for _, c := range req.Contents {
		in := false
		for _, p := range c.Parts {
			switch {
			case p.FunctionResponse != nil:
				in = true
				s := seenResult{}
				var v struct {
					Output  *string `json:"output"`
					Content any     `json:"content"`
				}
				if json.Unmarshal(p.FunctionResponse.Response, &v) == nil && v.Output != nil && v.Content == nil {
					s.Texts = append(s.Texts, *v.Output)
				} else {
					s.Texts = append(s.Texts, string(p.FunctionResponse.Response))
				}
				for _, q := range p.FunctionResponse.Parts {
					if q.InlineData != nil {
						s.Images++
					} else if q.Text != "" {
						s.Texts = append(s.Texts, q.Text)
					}
				}
				results = append(results, s)
			case in && p.InlineData != nil:
				results[len(results)-1].Images++
			case in && p.Text != "":
				results[len(results)-1].Texts = append(results[len(results)-1].Texts, p.Text)
			}
		}
	}
	name, args, side := m.turn(offered, results)
	var part map[string]any
	switch {
	case side && req.GenerationConfig.ResponseMimeType == "application/json":
		// Gemini CLI's own checks (next speaker, model routing, loops)
		// ask for JSON; one object answers them all.
		part = map[string]any{"text": `{"reasoning":"scripted","next_speaker":"user","model_choice":"flash","confidence":0}`}
	case side:
		part = map[string]any{"text": "Scripted side answer."}
	case name == "":
		part = map[string]any{"text": finalText}
	default:
		part = map[string]any{"functionCall": map[string]any{"name": name, "args": args}}
	}
	resp := map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
		"modelVersion":  "scripted",
	}
	if !stream {
		writeJSON(w, resp)
		return
	}
	sseHeaders(w)
	sse(w, "", resp)
}

// netGuard is the proxy every client run is told to use (HTTP_PROXY,
// HTTPS_PROXY, ALL_PROXY; NO_PROXY spares 127.0.0.1): a client that tries
// to reach anything but the scripted model through it is recorded and
// refused. It catches the traffic of clients that honour the proxy
// variables, which all four do for their HTTP clients.
type netGuard struct {
	addr string
	mu   sync.Mutex
	hits []string
}

func startNetGuard(t testing.TB) *netGuard {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &netGuard{addr: l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.hits = append(g.hits, r.Method+" "+r.Host)
		g.mu.Unlock()
		http.Error(w, "runbox e2e: no network but 127.0.0.1", http.StatusForbidden)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return g
}

func (g *netGuard) tried() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.hits)
}
