console.log("never reached");
