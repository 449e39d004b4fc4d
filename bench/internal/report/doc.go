// Package report prints plain-text tables with aligned columns: the first
// column left-aligned, the others right-aligned, notes below. It depends
// only on the standard library.
package report
