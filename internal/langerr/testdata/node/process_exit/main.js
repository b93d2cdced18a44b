console.error("fatal: bad config");
process.exit(2);
