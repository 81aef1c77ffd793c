//go:build !linux

package discover

import "io/fs"

// sysStat has no inode or ctime to offer here; size and mtime remain.
func sysStat(fs.FileInfo) (ino uint64, ctime int64) { return 0, 0 }
