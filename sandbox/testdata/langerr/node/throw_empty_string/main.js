throw "";
