Promise.reject();
