"""Call the MCP tools runbox connects to, from code in the box.

    import runbox_tools as tools
    tools.memory.create_entities(entities=[...])   # tools.<server>.<tool>(**args)
    tools.call("memory", "read_graph", {})         # any name, as the server spells it

A call returns the tool's structured content, or its text (a list when it
has several parts; images and other binary parts as bytes). A failure
raises ToolError with .kind, .server, .tool and .message. help(tools),
help(tools.<server>) and help(tools.<server>.<tool>) describe them, with
typed signatures. A typed function checks its arguments first: an unknown
keyword, a missing required argument or a value of the wrong JSON type
raises ToolError kind bad_request, and nothing is sent. tools.call sends
its arguments as given.

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
import typing as _typing

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


_SCALARS = {"string": str, "number": float, "integer": int, "boolean": bool, "null": type(None)}
_KINDS = {"string": "a string", "number": "a number", "integer": "an integer", "boolean": "a boolean",
          "null": "null (None)", "array": "a list", "object": "a dict"}


def _pascal(name):
    s = "".join(p[:1].upper() + p[1:] for p in "".join(c if c.isalnum() else "_" for c in name).split("_") if p)
    return s if s[:1].isalpha() else "T" + s


class _Annotations:
    """Python types of a tool's type model ("types" in list's answer, which
    runbox reads from the tool's schemas): objects with declared
    properties become TypedDicts, a recursive definition a dict."""

    def __init__(self, model, base):
        self.defs = model.get("defs") or {}
        self.base = base
        self.building = set()
        self.made = {}

    def of(self, t, name):
        """The annotation of t; Any where this Python cannot say it (an
        annotation is for reading, and never stops the import)."""
        try:
            return self._of(t, name)
        except Exception:
            return _typing.Any

    def _of(self, t, name):
        k = (t or {}).get("kind")
        if k in _SCALARS:
            return _SCALARS[k]
        if k == "literal":
            return _typing.Literal[tuple(t.get("values") or [None])]
        if k == "array":
            return list[self.of(t.get("items"), name + "Item")]
        if k == "union":
            return _typing.Union[tuple(self.of(m, name) for m in t.get("of") or [])]
        if k == "ref":
            r = t.get("ref")
            if r in self.made:
                return self.made[r]
            if r in self.building or r not in self.defs:
                return dict
            self.building.add(r)
            a = self.made[r] = self.of(self.defs[r], self.base + _pascal(r))
            self.building.discard(r)
            return a
        if k == "object":
            fields = t.get("fields") or []
            if not fields:
                return dict[str, self.of(t["extra"], name)] if t.get("extra") else dict
            ann = {}
            for f in fields:
                a = self.of(f.get("type"), name + _pascal(f["name"]))
                if hasattr(_typing, "Required"):
                    a = _typing.Required[a] if f.get("required") else _typing.NotRequired[a]
                ann[f["name"]] = a
            td = _typing.TypedDict(name, ann, total=False)
            td.__module__ = "runbox_tools"
            return td
        return _typing.Any


def _describe(t, defs, hops=0):
    k = (t or {}).get("kind")
    if k == "literal":
        return "one of " + ", ".join(_json.dumps(v) for v in t.get("values") or [])
    if k == "union":
        return " or ".join(_describe(m, defs, hops) for m in t.get("of") or [])
    if k == "ref" and hops < 8:
        return _describe(defs.get(t.get("ref")), defs, hops + 1)
    if k == "array" and (t.get("items") or {}).get("kind") not in (None, "unknown"):
        return "a list of " + _describe(t.get("items"), defs, hops).replace("a ", "", 1).replace("an ", "", 1) + "s"
    return _KINDS.get(k, "any value")


def _json_type(v):
    if v is None:
        return "None"
    return type(v).__name__


def _check(t, v, where, defs, hops=0):
    """Why v is not of type t (a message naming where), or None: JSON types
    only, and never stricter than the schema."""
    k = (t or {}).get("kind")
    bad = None
    if k == "string":
        bad = not isinstance(v, str)
    elif k == "number":
        bad = isinstance(v, bool) or not isinstance(v, (int, float))
    elif k == "integer":
        bad = isinstance(v, bool) or not (isinstance(v, int) or isinstance(v, float) and v.is_integer())
    elif k == "boolean":
        bad = not isinstance(v, bool)
    elif k == "null":
        bad = v is not None
    elif k == "literal":
        bad = not any(_same(v, x) for x in t.get("values") or [])
    elif k == "union":
        bad = all(_check(m, v, where, defs, hops) for m in t.get("of") or [])
    elif k == "ref":
        if hops > 32 or t.get("ref") not in defs:
            return None
        return _check(defs[t["ref"]], v, where, defs, hops + 1)
    elif k == "array":
        if not isinstance(v, (list, tuple)):
            bad = True
        else:
            for i, x in enumerate(v):
                why = _check(t.get("items"), x, "%s[%d]" % (where, i), defs)
                if why:
                    return why
    elif k == "object":
        if not isinstance(v, dict):
            bad = True
        else:
            return _check_fields(t, v, where + ".", defs)
    if bad:
        return "%s must be %s, not %s" % (where, _describe(t, defs), _json_type(v))
    return None


def _check_fields(t, v, prefix, defs):
    fields = {f["name"]: f for f in t.get("fields") or []}
    for name, f in fields.items():
        if f.get("required") and name not in v:
            return "missing required %s%s" % (prefix, name)
    for name, x in v.items():
        f = fields.get(name)
        if f is not None:
            why = _check(f.get("type"), x, prefix + str(name), defs)
        elif t.get("extra"):
            why = _check(t["extra"], x, prefix + str(name), defs)
        elif t.get("closed"):
            why = "unknown %s%s" % (prefix, name)
        else:
            why = None
        if why:
            return why
    return None


def _same(v, x):
    if isinstance(x, bool) or isinstance(v, bool):
        return type(v) is type(x) and v == x
    if x is None:
        return v is None
    if isinstance(x, (int, float)):
        return isinstance(v, (int, float)) and v == x
    return v == x


def _bad_request(sname, tname, msg):
    return ToolError("bad_request", sname, tname, msg)


def _stub(server, tool):
    """A typed function for one tool: its signature, docstring and the
    check of its arguments come from the tool's type model. The check
    runs before anything leaves the box; tools.call sends as given."""
    sname, tname = server["name"], tool["name"]
    model = tool.get("types") or {}
    args = model.get("args") or {}
    defs = model.get("defs") or {}
    typed = args.get("kind") == "object"
    fields = {f["name"]: f for f in args.get("fields") or []} if typed else {}
    extra = args.get("extra") if typed else None

    def stub(**kwargs):
        if typed:
            for name in list(kwargs):
                f = fields.get(name)
                if f is None and not extra:
                    known = ", ".join(fields) or "none"
                    raise _bad_request(sname, tname, "unknown argument %r (the tool takes: %s)" % (name, known))
                if f is not None and not f.get("required") and kwargs[name] is None and _check(f.get("type"), None, "", defs):
                    # None for an optional argument that takes no null: left out.
                    del kwargs[name]
            try:
                why = _check_fields(dict(args, closed=False), kwargs, "argument ", defs)
            except RecursionError:
                why = None
            if why:
                raise _bad_request(sname, tname, why)
        return call(sname, tname, kwargs)

    base = _pascal(tool["id"])
    ann = _Annotations(model, base)
    params, lines, kw = [], [], not typed or extra is not None
    for f in fields.values():
        pname, req = f["name"], f.get("required")
        a = ann.of(f.get("type"), base + _pascal(pname))
        desc = (f.get("doc") or "").strip()
        lines.append("    %s: %s%s%s" % (pname, _inspect.formatannotation(a), "" if req else " (optional)", " - " + desc if desc else ""))
        if not pname.isidentifier() or _keyword.iskeyword(pname):
            kw = True
            continue
        params.append(_inspect.Parameter(pname, _inspect.Parameter.KEYWORD_ONLY,
                                         default=_inspect.Parameter.empty if req else None, annotation=a))
    if kw:
        params.append(_inspect.Parameter("kwargs", _inspect.Parameter.VAR_KEYWORD))
    ret = ann.of(model["result"], base + "Result") if model.get("result") else _typing.Any
    stub.__signature__ = _inspect.Signature(params, return_annotation=ret)
    stub.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not _inspect.Parameter.empty}
    stub.__annotations__["return"] = ret
    stub.__name__ = tool["id"]
    stub.__qualname__ = "%s.%s" % (server["id"], tool["id"])
    stub.__module__ = "runbox_tools." + server["id"]
    doc = [(tool.get("description") or "").strip() or "(no description)", "",
           "MCP tool %r of server %r." % (tname, sname)]
    if lines:
        doc += ["", "Arguments:"] + lines
    out = tool.get("output_schema")
    if out:
        doc += ["", "Returns (structured content): " + _json.dumps(out)[:2000]]
    doc += ["", "Raises ToolError (kind bad_request, before it is sent; tool_error, denied, refused, limit, timeout, upstream)."]
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
