package initproto

import (
	_ "embed"
	"encoding/base64"
)

//go:embed node_proxy.mjs
var nodeProxy []byte

// ProxyEnv is what a box's environment gains when its manifest declares
// endpoints, pointing its programs at runbox-init's proxy at addr
// (ProxyAddr): the proxy variables, upper and lower case (curl reads only
// http_proxy in lower case; Python, pip and requests read either), an
// empty NO_PROXY (nothing in a box is reachable but through the proxy),
// and npm's settings; for Node, NodeProxyOptions goes in NODE_OPTIONS.
func ProxyEnv(addr string) map[string]string {
	u := "http://" + addr
	return map[string]string{
		"HTTP_PROXY": u, "http_proxy": u,
		"HTTPS_PROXY": u, "https_proxy": u,
		"ALL_PROXY": u, "all_proxy": u,
		"NO_PROXY": "", "no_proxy": "",
		// npm reads its proxy settings from these as well.
		"npm_config_proxy": u, "npm_config_https_proxy": u,
	}
}

// TrustVars are the variables the image's TLS clients read a CA bundle
// (CABundle) from: OpenSSL's (Python's ssl and urllib), requests', Node's
// extra CAs, pip's and curl's.
var TrustVars = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT", "CURL_CA_BUNDLE"}

// NodeProxyOptions makes Node's fetch, which ignores the proxy variables
// before Node 24, go through the proxy: a module loaded before the
// program (--import, Node 18.18 and later) as a data: URL, so nothing
// needs to be installed in the image.
func NodeProxyOptions() string {
	return "--import=data:text/javascript;base64," + base64.StdEncoding.EncodeToString(nodeProxy)
}
