package jssdk

import (
	"embed"
	"io/fs"
)

// Source holds the SDK's ESM source files, src/*.js, as they ship in the
// npm package.
//
//go:embed src/*.js
var Source embed.FS

// FS returns the SDK's source directory as a file system whose root holds
// index.js and the modules it imports, ready for http.FileServerFS under
// a path of the server's choosing (the modules import each other by
// relative path).
func FS() fs.FS {
	sub, err := fs.Sub(Source, "src")
	if err != nil {
		panic(err) // "src" is a valid path: fs.Sub cannot fail on it
	}
	return sub
}
