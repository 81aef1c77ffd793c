//go:build linux

package discover

import (
	"io/fs"
	"syscall"
)

// sysStat returns the inode and ctime, which change when a file is
// replaced (a ConfigMap symlink swap, an atomic rename) even if its size
// and mtime do not.
func sysStat(fi fs.FileInfo) (ino uint64, ctime int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino), st.Ctim.Sec*1e9 + st.Ctim.Nsec
	}
	return 0, 0
}
