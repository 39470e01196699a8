package report

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"strings"
)

// htmlPage lays out the HTML report. Everything it needs is inline: the
// style below and each plot's SVG.
var htmlPage = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="zbench report">
<title>{{.Title}}</title>
<style>
:root { --fg: #1d2329; --muted: #5b6570; --line: #d8dde3; --head: #f3f5f7; --accent: #1f77b4; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 15px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", "Liberation Sans", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 26px; margin: 8px 0 12px; }
h2 { font-size: 21px; margin: 40px 0 12px; padding-bottom: 6px; border-bottom: 1px solid var(--line); }
h3 { font-size: 17px; margin: 28px 0 10px; }
h4 { font-size: 15px; margin: 24px 0 8px; }
p { margin: 8px 0 12px; max-width: 80ch; }
code { font: 13px/1.4 ui-monospace, "SFMono-Regular", "Liberation Mono", Menlo, Consolas, monospace;
  background: var(--head); padding: 1px 4px; border-radius: 3px; }
nav { background: var(--head); border: 1px solid var(--line); border-radius: 6px; padding: 10px 18px; margin: 16px 0 8px; }
nav ul { margin: 4px 0; padding-left: 18px; }
nav li { margin: 2px 0; }
nav .l3 { margin-left: 16px; }
nav .l4 { margin-left: 32px; font-size: 14px; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
.scroll { overflow-x: auto; margin: 8px 0 16px; }
table { border-collapse: collapse; font-size: 13.5px; }
th, td { border: 1px solid var(--line); padding: 4px 10px; white-space: nowrap; text-align: left; }
th { background: var(--head); font-weight: 600; position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #fafbfc; }
figure { margin: 12px 0 24px; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
{{range .Intro}}<p>{{.}}</p>
{{end -}}
<nav><strong>Contents</strong>
<ul>
{{- range .Sections}}
<li class="l{{.Level}}"><a href="#{{.ID}}">{{.Heading}}</a></li>
{{- end}}
</ul>
</nav>
{{range .Sections -}}
<section>
<h{{.Level}} id="{{.ID}}">{{.Heading}}</h{{.Level}}>
{{range .Blocks -}}
{{if .Table}}<div class="scroll"><table>
<thead><tr>{{range .Table.Head}}<th{{if .Right}} class="num"{{end}}>{{.Text}}</th>{{end}}</tr></thead>
<tbody>
{{range .Table.Rows}}<tr>{{range .}}<td{{if .Right}} class="num"{{end}}>{{.Text}}</td>{{end}}</tr>
{{end}}</tbody>
</table></div>
{{else if .Figure}}<figure>
{{.Figure.SVG}}
<figcaption>{{.Figure.Title}} ({{.Figure.Name}}.svg, {{.Figure.Name}}.png)</figcaption>
</figure>
{{else}}<p>{{.Para}}</p>
{{end}}
{{- end}}
</section>
{{end -}}
</main>
</body>
</html>
`))

// Values of htmlPage.
type (
	htmlDoc struct {
		Title    string
		Intro    []template.HTML
		Sections []htmlSection
	}
	htmlSection struct {
		Level       int
		ID, Heading string
		Blocks      []htmlBlock
	}
	htmlBlock struct {
		Para   template.HTML
		Table  *htmlTable
		Figure *htmlFigure
	}
	htmlTable struct {
		Head []htmlCell
		Rows [][]htmlCell
	}
	htmlCell struct {
		Text  string
		Right bool
	}
	htmlFigure struct {
		Name, Title string
		SVG         template.HTML
	}
)

// html writes the document as one self-contained HTML page.
func (d *document) html() ([]byte, error) {
	hd := htmlDoc{Title: d.title}
	for _, p := range d.intro {
		hd.Intro = append(hd.Intro, htmlText(p))
	}
	for _, s := range d.sections {
		hs := htmlSection{Level: s.level, ID: s.id, Heading: s.heading}
		for _, b := range s.blocks {
			switch {
			case b.table != nil:
				hs.Blocks = append(hs.Blocks, htmlBlock{Table: newHTMLTable(b.table)})
			case b.fig != nil:
				// The SVG is gonum's output for text we passed it,
				// which vgsvg escapes.
				hs.Blocks = append(hs.Blocks, htmlBlock{Figure: &htmlFigure{
					Name: b.fig.name, Title: b.fig.title, SVG: template.HTML(inlineSVG(b.fig.svg)),
				}})
			default:
				hs.Blocks = append(hs.Blocks, htmlBlock{Para: htmlText(b.para)})
			}
		}
		hd.Sections = append(hd.Sections, hs)
	}
	var w bytes.Buffer
	if err := htmlPage.Execute(&w, hd); err != nil {
		return nil, fmt.Errorf("HTML template: %w", err)
	}
	return w.Bytes(), nil
}

func newHTMLTable(t *table) *htmlTable {
	right := func(i int) bool { return i < len(t.right) && t.right[i] }
	ht := &htmlTable{}
	for i, h := range t.head {
		ht.Head = append(ht.Head, htmlCell{h, right(i)})
	}
	for _, r := range t.rows {
		var row []htmlCell
		for i, c := range r {
			row = append(row, htmlCell{c, right(i)})
		}
		ht.Rows = append(ht.Rows, row)
	}
	return ht
}

// htmlText escapes paragraph text and marks `code` spans.
func htmlText(s string) template.HTML {
	parts := strings.Split(s, "`")
	var b strings.Builder
	for i, p := range parts {
		// An odd part is inside backquotes, unless it is the last
		// part of an unbalanced string.
		if i%2 == 1 && i < len(parts)-1 {
			b.WriteString("<code>" + html.EscapeString(p) + "</code>")
		} else {
			if i%2 == 1 {
				b.WriteString("`")
			}
			b.WriteString(html.EscapeString(p))
		}
	}
	return template.HTML(b.String())
}

// inlineSVG drops the namespace declarations of a standalone SVG file: an
// HTML parser puts <svg> in the SVG namespace by itself, and the plots
// link nothing, so the page refers to no URL at all.
func inlineSVG(svg []byte) string {
	r := strings.NewReplacer(
		` xmlns="http://www.w3.org/2000/svg"`, "",
		` xmlns:xlink="http://www.w3.org/1999/xlink"`, "",
		"\n\txmlns=\"http://www.w3.org/2000/svg\"", "",
		"\n\txmlns:xlink=\"http://www.w3.org/1999/xlink\"", "",
	)
	return r.Replace(string(svg))
}
