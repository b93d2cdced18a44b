const e = new Error("request failed");
e.code = "E_HTTP";
e.status = 503;
throw e;
