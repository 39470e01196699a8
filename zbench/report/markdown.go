package report

import (
	"bytes"
	"fmt"
	"strings"
)

// markdown writes the document as GitHub-flavoured markdown; figures link
// their PNG files by relative path.
func (d *document) markdown() []byte {
	var w bytes.Buffer
	fmt.Fprintf(&w, "# %s\n\n", mdText(d.title))
	for _, p := range d.intro {
		fmt.Fprintf(&w, "%s\n\n", p)
	}
	for _, s := range d.sections {
		fmt.Fprintf(&w, "%s %s\n\n", strings.Repeat("#", s.level), mdText(s.heading))
		for _, b := range s.blocks {
			switch {
			case b.table != nil:
				mdTable(&w, b.table)
			case b.fig != nil:
				fmt.Fprintf(&w, "![%s](%s.png)\n\n", mdText(b.fig.title), b.fig.name)
			default:
				fmt.Fprintf(&w, "%s\n\n", b.para)
			}
		}
	}
	return w.Bytes()
}

// mdTable writes t as a pipe table.
func mdTable(w *bytes.Buffer, t *table) {
	row := func(cells []string) {
		w.WriteString("|")
		for _, c := range cells {
			fmt.Fprintf(w, " %s |", mdCell(c))
		}
		w.WriteString("\n")
	}
	row(t.head)
	w.WriteString("|")
	for i := range t.head {
		if i < len(t.right) && t.right[i] {
			w.WriteString("---:|")
		} else {
			w.WriteString("---|")
		}
	}
	w.WriteString("\n")
	for _, r := range t.rows {
		row(r)
	}
	w.WriteString("\n")
}

// mdCell escapes a table cell: pipes, '<' that would start HTML, and line
// breaks that would end the row.
func mdCell(s string) string {
	s = strings.NewReplacer("|", `\|`, "<", "&lt;").Replace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// mdText escapes the characters that markdown would take as markup in a
// heading or alt text.
func mdText(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "<", "&lt;")
	return r.Replace(s)
}
