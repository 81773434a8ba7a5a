package online_test

import (
	"bufio"
	"compress/gzip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/streamlearn/streamlearn/internal/online"
)

// sharedDir is the shared directory next to the repository.
var sharedDir = filepath.Join("..", "..", "..", "shared")

// readPhishing reads River's Phishing data set in place: 1,250 rows of 9
// features and the label is_phishing (1 → +1, 0 → -1). Every feature is
// kept, zeros included, at slot = column index, as River's dict holds all
// nine keys. It skips the test when the shared directory is absent.
func readPhishing(t testing.TB) ([]online.Vector, []int8) {
	t.Helper()
	path := filepath.Join(sharedDir, "data", "river_phishing", "phishing.csv.gz")
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		t.Skipf("%s absent", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	var xs []online.Vector
	var ys []int8
	line := 0
	for sc.Scan() {
		line++
		fields := strings.Split(strings.TrimSpace(sc.Text()), ",")
		if line == 1 {
			if len(fields) != 10 || fields[9] != "is_phishing" {
				t.Fatalf("%s: unexpected header %q", path, sc.Text())
			}
			continue
		}
		if len(fields) != 10 {
			t.Fatalf("%s:%d: %d fields", path, line, len(fields))
		}
		var x online.Vector
		for j, s := range fields[:9] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			x.Idx = append(x.Idx, uint32(j))
			x.Val = append(x.Val, v)
		}
		y := online.Negative
		if fields[9] == "1" {
			y = online.Positive
		}
		xs = append(xs, x)
		ys = append(ys, y)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(xs) != 1250 {
		t.Fatalf("%s: %d rows, want 1250", path, len(xs))
	}
	return xs, ys
}

// prequential runs scaler | learner test-then-train over the stream, as
// River's evaluate.progressive_val_score does with a Pipeline: for each
// row, the scaler learns x then transforms it (Pipeline.predict_one), the
// learner predicts, and learns from the same transformed x (the scaler is
// not updated again by Pipeline.learn_one). It returns the correct count.
func prequential(t *testing.T, xs []online.Vector, ys []int8, sc *online.Scaler, l online.Learner) int {
	t.Helper()
	var z online.Vector
	correct := 0
	for k, x := range xs {
		sc.Transform(&z, x)
		p := l.Predict(z)
		if p.Label == ys[k] {
			correct++
		}
		l.Learn(z, p, ys[k])
	}
	return correct
}

// TestRiverPhishingPerceptron reproduces River's docstring result for
// StandardScaler | Perceptron on the Phishing data: "Accuracy: 85.84%"
// (river/linear_model/perceptron.py; see PROVENANCE.md), i.e. 1073 of
// 1250 rows. River's Perceptron is LogisticRegression with
// Hinge(threshold=0), SGD(1) and intercept_lr 1: on y·(⟨w,x⟩+b) ≤ 0,
// w += y·x and b += y, which is our Perceptron with Bias; it predicts
// False on a tie, like ours.
func TestRiverPhishingPerceptron(t *testing.T) {
	xs, ys := readPhishing(t)
	sc, err := online.NewScaler(4, online.ScaleStandard)
	if err != nil {
		t.Fatal(err)
	}
	p, err := online.NewPerceptron(4, online.PerceptronConfig{Bias: true})
	if err != nil {
		t.Fatal(err)
	}
	got := prequential(t, xs, ys, sc, p)
	t.Logf("StandardScaler | Perceptron: %d/%d = %.2f%%", got, len(xs), 100*float64(got)/float64(len(xs)))
	if got != 1073 {
		t.Errorf("correct = %d, want 1073 (River: 85.84%%)", got)
	}
}

// TestRiverPhishingPerceptronVariants shows that each of the semantics the
// River match depends on is visible in the count, so the match above is
// not luck: the bias, the tie rule (one exact tie, on the first row) and
// updating the scaler before transforming.
func TestRiverPhishingPerceptronVariants(t *testing.T) {
	xs, ys := readPhishing(t)
	for _, tc := range []struct {
		name                 string
		bias, tiePositive    bool
		scaleBeforeObserving bool
		want                 int
	}{
		{"river", true, false, false, 1073},
		{"tie predicts +1", true, true, false, 1074},
		{"scaler updated after use", true, false, true, 1058},
		{"no bias", false, false, false, 1045},
	} {
		sc, _ := online.NewScaler(4, online.ScaleStandard)
		p, _ := online.NewPerceptron(4, online.PerceptronConfig{Bias: tc.bias})
		var z online.Vector
		correct := 0
		for k, x := range xs {
			if tc.scaleBeforeObserving {
				sc.Scale(&z, x)
				sc.Observe(x)
			} else {
				sc.Transform(&z, x)
			}
			pr := p.Predict(z)
			if tc.tiePositive && pr.Score == 0 {
				pr.Label = online.Positive
			}
			if pr.Label == ys[k] {
				correct++
			}
			p.Learn(z, pr, ys[k])
		}
		if correct != tc.want {
			t.Errorf("%s: correct = %d, want %d", tc.name, correct, tc.want)
		}
	}
}

// TestRiverPhishingLogisticRegression reproduces River's docstring result
// for StandardScaler | LogisticRegression(optimizer=SGD(0.1)) on the
// Phishing data: "Accuracy: 88.96%" (river/linear_model/log_reg.py), i.e.
// 1112 of 1250 rows. River's LogisticRegression is SGD on the log loss
// with the weights' step 0.1 and the intercept's own default
// intercept_lr = 0.01, both constant: OGD with loss logistic, schedule
// fixed, eta 0.1, bias, bias_eta 0.01 and no projection. (River evaluates
// the log-loss gradient with shortcuts beyond |y·s| > 18 that differ from
// ours in the last bits; the counts agree.)
func TestRiverPhishingLogisticRegression(t *testing.T) {
	xs, ys := readPhishing(t)
	for _, tc := range []struct {
		biasEta float64
		want    int
	}{
		// River's configuration.
		{0.01, 1112},
		// The same with one step size for the bias: not River's number,
		// which shows the intercept rate matters (1123 = 89.84%).
		{0, 1123},
	} {
		sc, err := online.NewScaler(4, online.ScaleStandard)
		if err != nil {
			t.Fatal(err)
		}
		o, err := online.NewOGD(4, online.OGDConfig{Loss: online.LossLogistic, Eta: 0.1,
			Schedule: online.ScheduleFixed, Bias: true, BiasEta: tc.biasEta})
		if err != nil {
			t.Fatal(err)
		}
		got := prequential(t, xs, ys, sc, o)
		t.Logf("StandardScaler | OGD(logistic, fixed 0.1, bias_eta %v): %d/%d = %.2f%%", tc.biasEta, got, len(xs), 100*float64(got)/float64(len(xs)))
		if got != tc.want {
			t.Errorf("bias_eta %v: correct = %d, want %d", tc.biasEta, got, tc.want)
		}
	}
}
