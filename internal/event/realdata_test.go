package event

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// sharedData is the shared data folder next to the repository.
const sharedData = "../../../shared/data"

// TestRealData reads every dataset in place and checks the row and label
// counts stated in its PROVENANCE.md.
func TestRealData(t *testing.T) {
	t.Parallel() // CPU or waits, no shared state: overlaps the package's other long tests
	if _, err := os.Stat(sharedData); err != nil {
		t.Skipf("shared data not available: %v", err)
	}
	tests := []struct {
		path     string
		cfg      Config
		format   Format
		rows     int // PROVENANCE.md "Counts"
		positive int
		empty    int // rows without features
	}{
		{path: "a9a/a9a", format: LIBSVM, rows: 32561, positive: 7841},
		{path: "a9a/a9a.t", format: LIBSVM, rows: 16281, positive: 3846},
		{path: "ijcnn1/ijcnn1.trn.gz", format: LIBSVM, rows: 49990, positive: 4853},
		{path: "ijcnn1/ijcnn1.tst.gz", format: LIBSVM, rows: 91701, positive: 8712},
		{path: "reuters_lasvm/reuters.trn.gz", format: LIBSVM, rows: 7770, positive: 538},
		{path: "w8a/w8a", format: LIBSVM, rows: 49749, positive: 1479, empty: 4203},
		// Lines 3377 and 4825 hold only emoticons (":)", ":-) :-)"): no tokens.
		{path: "sms_spam_collection/SMSSpamCollection", format: TSV, rows: 5574, positive: 747, empty: 2,
			cfg: Config{Positive: []string{"spam"}, Negative: []string{"ham"}}},
		{path: "elec2/elec.csv", format: CSV, rows: 45312, positive: 19237, cfg: Config{LabelColumn: "class"}},
		{path: "weather/weather.csv", format: CSV, rows: 18159, positive: 5698, cfg: Config{LabelColumn: "target"}},
		{path: "river_phishing/phishing.csv.gz", format: CSV, rows: 1250, positive: 548, cfg: Config{LabelColumn: "is_phishing"}},
		{path: "uci_phishing_websites/phishing_websites.csv.gz", format: CSV, rows: 11055, positive: 6157, cfg: Config{LabelColumn: "Result"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			f, err := os.Open(filepath.Join(sharedData, tt.path))
			if err != nil {
				t.Skipf("dataset not available: %v", err)
			}
			defer f.Close()
			r, err := NewReader(f, filepath.Base(tt.path), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Format() != tt.format {
				t.Errorf("format %q, want %q", r.Format(), tt.format)
			}
			var ev Event
			rows, pos, empty, invalid := 0, 0, 0, 0
			mask := online.Mask(DefaultBits)
			for {
				err := r.Next(&ev)
				if err == io.EOF {
					break
				}
				var e *Error
				if errors.As(err, &e) {
					invalid++
					if invalid <= 3 {
						t.Errorf("invalid record: %v", err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				rows++
				if !ev.Labeled {
					t.Fatalf("row %d unlabeled", rows)
				}
				if ev.Label == online.Positive {
					pos++
				}
				if ev.X.Len() == 0 {
					empty++
				}
				checkCanonical(t, ev.X, mask)
			}
			if rows != tt.rows || pos != tt.positive || empty != tt.empty || invalid != 0 {
				t.Errorf("rows %d, positive %d, empty %d, invalid %d; want %d, %d, %d, 0",
					rows, pos, empty, invalid, tt.rows, tt.positive, tt.empty)
			}
		})
	}
}
