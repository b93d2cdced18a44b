// Package expose opens a session's web server to the person: for each
// exposure a listener of runbox's own on the host (loopback unless the
// manifest says otherwise) whose connections it carries, once checked,
// over the session box's channel to a port on the box's loopback
// (sandbox.SessionDialer). The box keeps no interface but lo and no host
// socket.
//
// Who gets in: the URL carries an unguessable token, set on the first
// visit as an HttpOnly, SameSite=Strict cookie and never forwarded; every
// request must carry it and name the printed host in its Host header (no
// DNS rebinding); a browser's request sent from another site is refused.
// Exposures belong to the client that made them (the bearer token's name
// over HTTP), end with their session, and are capped per session and in
// connections each. The package knows no MCP and no engine.
package expose
