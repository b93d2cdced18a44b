console.log("x");
throw "something broke";
