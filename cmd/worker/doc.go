// Command worker is rolecall's one binary: the worker (run) and the tools
// around it (resolve, explain, roster, validate, submit, tail, bench).
//
// Exit codes: 0 success, 1 typed failure (the failure JSON is on stdout),
// 2 usage error (message on stderr).
package main
