const text = "{bad json";
const data = JSON.parse(text);
