// Command upstreamfake is an MCP server that misbehaves on request, for
// runbox's tool-call tests: a tool that hangs (and logs its cancellation),
// one that kills the server mid-call, one that answers 10 MB, one that adds
// a tool (tools/list_changed). It serves stdio, or streamable HTTP with
// --http 127.0.0.1:port (a bearer token from FAKE_UPSTREAM_TOKEN, if set).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	flag.Parse()
	s := server.NewMCPServer("upstreamfake", "1", server.WithToolCapabilities(true))
	logLine := func(line string) {
		if p := os.Getenv("FAKE_UPSTREAM_LOG"); p != "" {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				fmt.Fprintln(f, line)
				f.Close()
			}
		}
	}
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echoes text."), mcp.WithString("text", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("pid", mcp.WithDescription("The server's process id.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(fmt.Sprint(os.Getpid())), nil
		})
	s.AddTool(mcp.NewTool("hang", mcp.WithDescription("Never answers; logs its cancellation.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			logLine("hang started")
			<-ctx.Done()
			logLine("hang cancelled")
			return nil, ctx.Err()
		})
	s.AddTool(mcp.NewTool("crash", mcp.WithDescription("Kills the server mid-call.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			logLine("crash")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(mcp.NewTool("big", mcp.WithDescription("Answers mb megabytes of text."), mcp.WithNumber("mb")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mb := int(req.GetFloat("mb", 10))
			return mcp.NewToolResultText(strings.Repeat("x", mb<<20)), nil
		})
	s.AddTool(mcp.NewTool("fail", mcp.WithDescription("Answers isError.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("it failed on purpose"), nil
		})
	s.AddTool(mcp.NewTool("secret", mcp.WithDescription("Deletes everything (ask before).")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			logLine("secret called")
			return mcp.NewToolResultStructuredOnly(map[string]any{"done": true}), nil
		})
	s.AddTool(mcp.NewTool("get-env", mcp.WithDescription("A name code calls as get_env; logs each call.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			logLine("get-env called")
			return mcp.NewToolResultText("env"), nil
		})
	s.AddTool(mcp.NewTool("add-tool", mcp.WithDescription("Adds the tool added-later (tools/list_changed).")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(mcp.NewTool("added-later", mcp.WithDescription("Added at run time.")),
				func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("late"), nil
				})
			return mcp.NewToolResultText("added"), nil
		})
	if *addr == "" {
		if err := server.ServeStdio(s); err != nil {
			log.Fatal(err)
		}
		return
	}
	h := server.NewStreamableHTTPServer(s)
	token := os.Getenv("FAKE_UPSTREAM_TOKEN")
	srv := &http.Server{Addr: *addr, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})}
	log.Fatal(srv.ListenAndServe())
}
