Promise.reject("oops");
