package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// formatTime formats seconds with four significant digits in a readable
// unit: "950.5 ms", "1.186 s".
func formatTime(sec float64) string {
	scale, unit := timeScale(sec)
	return sig4(sec*scale) + " " + unit
}

// sig4 formats v with four significant digits, keeping trailing zeros
// ("3.000", "961.4", "0.5159") and without an exponent from 1000 up.
func sig4(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a < 0.001:
		return fmt.Sprintf("%.3e", v)
	}
	return strings.TrimSuffix(fmt.Sprintf("%#.4g", v), ".")
}

// formatTimeStat formats a median time with its confidence interval as
// benchstat does: "950.5 ms ± 3%", "1.186 s ± ∞".
func formatTimeStat(s stat) string {
	return formatTime(s.Center) + " ± " + s.PctRangeString()
}

// formatRate formats a median rate with its interval: "23.25 GFLOP/s ± 2%".
func formatRate(s stat, unit string) string {
	return sig4(s.Center) + " " + unit + " ± " + s.PctRangeString()
}

// formatRelErr formats a median relative error, "—" when there is none.
func formatRelErr(s stat, ok bool) string {
	switch {
	case !ok:
		return "—"
	case s.Center == 0:
		return "0"
	}
	return strconv.FormatFloat(s.Center, 'e', 1, 64)
}

// formatRatio formats a speed-up with three significant digits: "0.0815×",
// "2.31×", "12.3×", and "154×" from 100 up.
func formatRatio(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0) || v <= 0:
		return "—"
	case v >= 100:
		return fmt.Sprintf("%.0f×", v)
	}
	decimals := 2 - int(math.Floor(math.Log10(v)))
	return fmt.Sprintf("%.*f×", decimals, v)
}

// formatP formats a p-value, "—" when there is none.
func formatP(p float64, ok bool) string {
	switch {
	case !ok:
		return "—"
	case p < 0.001:
		return "<0.001"
	}
	return fmt.Sprintf("%.3f", p)
}
