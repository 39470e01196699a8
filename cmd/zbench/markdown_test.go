package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// renderGFM renders markdown as GitHub does (GFM tables).
func renderGFM(t *testing.T, md []byte) string {
	t.Helper()
	var html bytes.Buffer
	require.NoError(t, goldmark.New(goldmark.WithExtensions(extension.GFM)).Convert(md, &html))
	return html.String()
}

// TestMarkdownRendersTables: the markdown of compare and of report render
// as tables with every row, not as paragraphs of pipes.
func TestMarkdownRendersTables(t *testing.T) {
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"compare", "-format", "markdown", aa1, aa2}, &stdout, &bytes.Buffer{}))
	html := renderGFM(t, stdout.Bytes())
	assert.Equal(t, 2, strings.Count(html, "<table>"), "a table for Kernels and one for MatMul")
	assert.Equal(t, 8+2, strings.Count(html, "<tr>"), "a row per benchmark and a header row per table")
	assert.NotContains(t, html, "<p>|")

	dir := t.TempDir()
	require.NoError(t, run([]string{"report", "-o", dir, ourBaseline, torchBaseline}, &bytes.Buffer{}, &bytes.Buffer{}))
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	html = renderGFM(t, md)
	assert.Greater(t, strings.Count(html, "<table>"), 3)
	assert.NotContains(t, html, "<p>|")
	assert.Contains(t, html, `<img src="`)
}
