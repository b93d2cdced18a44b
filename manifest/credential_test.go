package manifest

import (
	"strings"
	"testing"
)

func TestCredentialValidation(t *testing.T) {
	entry := func(cred string) string {
		return "network:\n  allow:\n    - host: api.example.com\n      credential: " + cred + "\n"
	}
	m := loadCase(t, entry(`{env: GITHUB_TOKEN, format: "token {secret}", placeholder: github}`), "")
	c := m.Network.Allow[0].Credential
	if c.HeaderName() != "Authorization" || c.FormatOrDefault() != "token {secret}" || !m.Network.Intercepts() {
		t.Fatalf("%+v", c)
	}
	if k, v := c.PlaceholderEnv(); k != "RUNBOX_SECRET_GITHUB" || v != "runbox-secret:github" {
		t.Fatalf("placeholder %s=%s", k, v)
	}
	if d := m.Describe(); !strings.Contains(d, "api.example.com:80,443 (runbox adds its Authorization header)") {
		t.Errorf("description:\n%s", d)
	}
	m = loadCase(t, entry(`{file: /run/secrets/key, header: x-api-key, format: "{secret}"}`), "")
	if m.Network.Allow[0].Credential.HeaderName() != "X-Api-Key" {
		t.Fatal(m.Network.Allow[0].Credential.HeaderName())
	}
	if loadCase(t, "network:\n  allow:\n    - host: a.example\n", "").Network.Intercepts() {
		t.Fatal("no credential, yet intercepts")
	}
	for _, tc := range []struct{ cred, want string }{
		{`{}`, "network.allow[0].credential.env"},
		{`{env: A, file: /x}`, "network.allow[0].credential.file"},
		{`{env: "1BAD"}`, "network.allow[0].credential.env"},
		{`{file: relative/path}`, "network.allow[0].credential.file"},
		{`{env: A, header: Host}`, "network.allow[0].credential.header"},
		{`{env: A, header: content-length}`, "network.allow[0].credential.header"},
		{`{env: A, header: "Bad Header"}`, "network.allow[0].credential.header"},
		{`{env: A, format: "Bearer"}`, "network.allow[0].credential.format"},
		{`{env: A, format: "{secret} {secret}"}`, "network.allow[0].credential.format"},
		{`{env: A, format: "Bearer {secret}\r\nX: y"}`, "network.allow[0].credential.format"},
		{`{env: A, placeholder: GitHub}`, "network.allow[0].credential.placeholder"},
		{`{env: A, value: s3cret}`, "unknown field"},
	} {
		loadCase(t, entry(tc.cred), tc.want)
	}
	loadCase(t, "network:\n  allow:\n    - host: a.example\n      credential: {env: A, placeholder: x}\n    - host: b.example\n      credential: {env: B, placeholder: x}\n",
		"network.allow[1].credential.placeholder")
}
