"""Call the MCP tools runbox connects to, from code in the box.

    import runbox_tools as tools
    tools.memory.create_entities(entities=[...])   # tools.<server>.<tool>(**args)
    tools.call("memory", "read_graph", {})         # any name, as the server spells it

A call returns the tool's structured content, or its text (a list when it
has several parts; images and other binary parts as bytes). A failure
raises ToolError with .kind, .server, .tool and .message. help(tools),
help(tools.<server>) and help(tools.<server>.<tool>) describe them.

Names that are not identifiers read with - and . (and anything else) as _,
e.g. get-sum is tools.everything.get_sum. Calls go to runbox-init over a
socket inside the box, and from there over runbox's own channel to the
host, which applies the manifest's policy and limits: the box has no
network.
"""

import base64 as _base64
import inspect as _inspect
import json as _json
import keyword as _keyword
import socket as _socket
import sys as _sys
import types as _types

_SOCKET = "/tmp/.runbox/tools.sock"

__all__ = ["call", "servers", "ToolError", "UnknownToolError"]


class ToolError(Exception):
    """A tool call that failed: kind says why (tool_error, denied, refused,
    limit, timeout, upstream, unknown_server, unknown_tool, bad_request,
    unavailable)."""

    def __init__(self, kind, server, tool, message):
        self.kind, self.server, self.tool, self.message = kind, server, tool, message
        super().__init__("%s.%s: %s (%s)" % (server, tool, message, kind))


class UnknownToolError(ToolError, AttributeError):
    """A server or tool that runbox does not know."""


def _request(req):
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        try:
            s.connect(_SOCKET)
        except OSError:
            raise ToolError("unavailable", req.get("server", ""), req.get("tool", ""),
                            "no tool servers are available to this run") from None
        broke = None
        # runbox-init reads a request to its end even when it refuses it
        # (too large), so the answer follows; a connection that broke
        # anyway still gives what came.
        try:
            s.sendall(_json.dumps(req).encode())
            s.shutdown(_socket.SHUT_WR)
        except OSError as e:
            broke = e
        chunks = []
        while True:
            try:
                b = s.recv(1 << 20)
            except OSError as e:
                broke = broke or e
                break
            if not b:
                break
            chunks.append(b)
    finally:
        s.close()
    try:
        return _json.loads(b"".join(chunks))
    except ValueError:
        why = "the call ended without an answer"
        if broke is not None:
            why = "the call's connection to runbox-init broke (%s)" % type(broke).__name__
        raise ToolError("upstream", req.get("server", ""), req.get("tool", ""), why) from None


def _raise(a, server, tool):
    e = a.get("error") or {}
    kind = e.get("kind", "upstream")
    cls = UnknownToolError if kind in ("unknown_server", "unknown_tool") else ToolError
    raise cls(kind, e.get("server") or server, e.get("tool") or tool, e.get("message", "failed"))


def _result(a):
    if a.get("structured") is not None:
        return a["structured"]
    parts = []
    for c in a.get("content") or []:
        t = c.get("type")
        if t == "text":
            parts.append(c.get("text", ""))
        elif t in ("image", "audio", "blob"):
            parts.append(_base64.b64decode(c.get("data", "")))
        elif t == "link":
            parts.append(c.get("uri", ""))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else parts


def call(server, name, args=None, **kwargs):
    """Call tool name of server with args (a dict) and/or keyword arguments."""
    args = dict(args or {})
    args.update(kwargs)
    a = _request({"op": "call", "server": server, "tool": name, "args": args})
    if not a.get("ok"):
        _raise(a, server, name)
    return _result(a)


_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict, "null": type(None)}


def _type(schema):
    if not isinstance(schema, dict):
        return _inspect.Parameter.empty
    t = schema.get("type")
    if isinstance(t, list):
        ts = [_TYPES[x] for x in t if x in _TYPES]
        if not ts:
            return _inspect.Parameter.empty
        u = ts[0]
        for x in ts[1:]:
            u = u | x
        return u
    return _TYPES.get(t, _inspect.Parameter.empty)


def _stub(server, tool):
    sname, tname = server["name"], tool["name"]

    def stub(**kwargs):
        return call(sname, tname, kwargs)

    schema = tool.get("input_schema") or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    params, lines, extra = [], [], False
    for pname in sorted(props, key=lambda p: (p not in required, p)):
        ps = props[pname] or {}
        desc = (ps.get("description") or "").strip()
        lines.append("    %s%s: %s" % (pname, "" if pname in required else " (optional)", desc or ps.get("type", "")))
        if not pname.isidentifier() or _keyword.iskeyword(pname):
            extra = True
            continue
        params.append(_inspect.Parameter(pname, _inspect.Parameter.KEYWORD_ONLY,
                                         default=_inspect.Parameter.empty if pname in required else None,
                                         annotation=_type(ps)))
    if extra or schema.get("additionalProperties") not in (None, False):
        params.append(_inspect.Parameter("kwargs", _inspect.Parameter.VAR_KEYWORD))
    out = tool.get("output_schema")
    ret = dict if out else _inspect.Parameter.empty
    stub.__signature__ = _inspect.Signature(params, return_annotation=ret)
    stub.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not _inspect.Parameter.empty}
    if ret is not _inspect.Parameter.empty:
        stub.__annotations__["return"] = ret
    stub.__name__ = tool["id"]
    stub.__qualname__ = "%s.%s" % (server["id"], tool["id"])
    stub.__module__ = "runbox_tools." + server["id"]
    doc = [(tool.get("description") or "").strip() or "(no description)", "",
           "MCP tool %r of server %r." % (tname, sname)]
    if lines:
        doc += ["", "Arguments:"] + lines
    if out:
        doc += ["", "Returns (structured content): " + _json.dumps(out)[:2000]]
    doc += ["", "Raises ToolError (kind tool_error, denied, refused, limit, timeout, upstream)."]
    stub.__doc__ = "\n".join(doc)
    return stub


def _namespace(server):
    mod = _types.ModuleType("runbox_tools." + server["id"],
                            "Tools of MCP server %r (%d)." % (server["name"], len(server.get("tools") or [])) +
                            ("\n\nNot reachable: " + server["error"] if server.get("error") else ""))
    names = []
    for tool in server.get("tools") or []:
        if tool["id"] not in mod.__dict__:
            setattr(mod, tool["id"], _stub(server, tool))
            names.append(tool["id"])
    mod.__all__ = names

    def missing(name, _server=server):
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnknownToolError("unknown_tool", _server["name"], name, "server %r has no tool %r" % (_server["name"], name))

    mod.__getattr__ = missing
    return mod


def _load():
    try:
        a = _request({"op": "list"})
    except ToolError:
        return []
    if not a.get("ok"):
        return []
    return a.get("servers") or []


_catalog = _load()
_servers = {}
for _s in _catalog:
    _servers[_s["id"]] = _namespace(_s)
    globals()[_s["id"]] = _servers[_s["id"]]
    __all__.append(_s["id"])
__doc__ += "\nServers: " + (", ".join("%s (%d tools)" % (s["id"], len(s.get("tools") or [])) for s in _catalog) or "none") + "\n"


def servers():
    """The servers and their tools' names: {server: [tool, ...]}."""
    return {s["id"]: [t["id"] for t in s.get("tools") or []] for s in _catalog}


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise UnknownToolError("unknown_server", name, "", "no server %r is configured" % name)
