package checkpoint

import (
	"context"
	"os"
	"testing"
	"time"
)

// Stamps change with every checkpoint saved, in a directory (even where
// the file system reuses the inode and keeps coarse times) and in a
// bucket, and stay while nothing is saved; a partition without a
// checkpoint has none.
func TestStamps(t *testing.T) {
	ctx := context.Background()
	dir, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bucket := dialStore(t, natsServer(t).ClientURL(), "STAMPS", ObjectStoreConfig{})
	for name, st := range map[string]interface {
		Store
		Stamper
	}{"dir": dir, "bucket": bucket} {
		t.Run(name, func(t *testing.T) {
			if s, err := st.Stamps(ctx); err != nil || len(s) != 0 {
				t.Fatalf("empty store: %v, %v", s, err)
			}
			seen := map[string]bool{}
			var mtime time.Time
			for pos := range int64(4) {
				c := sample(1)
				c.Position = pos
				if err := st.Save(ctx, c); err != nil {
					t.Fatal(err)
				}
				if name == "dir" {
					// Coarse times: every file of one modification time.
					if pos == 0 {
						fi, err := os.Stat(dir.File(1))
						if err != nil {
							t.Fatal(err)
						}
						mtime = fi.ModTime()
					}
					if err := os.Chtimes(dir.File(1), mtime, mtime); err != nil {
						t.Fatal(err)
					}
				}
				s, err := st.Stamps(ctx)
				if err != nil || len(s) != 1 || s[1] == "" {
					t.Fatalf("position %d: stamps %v, %v", pos, s, err)
				}
				if seen[s[1]] {
					t.Errorf("position %d: stamp %q of an earlier checkpoint", pos, s[1])
				}
				seen[s[1]] = true
				if again, _ := st.Stamps(ctx); again[1] != s[1] {
					t.Errorf("position %d: the stamp changed with nothing saved: %q, %q", pos, s[1], again[1])
				}
			}
		})
	}
}
