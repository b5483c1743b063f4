package polls

// ReadWithin is readWithin, for the tests of package polls_test.
var ReadWithin = readWithin
