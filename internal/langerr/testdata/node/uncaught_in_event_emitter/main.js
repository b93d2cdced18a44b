const EventEmitter = require("events");
const em = new EventEmitter();
em.emit("error", new Error("emitter broke"));
