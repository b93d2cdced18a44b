throw undefined;
