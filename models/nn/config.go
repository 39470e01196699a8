package nn

import (
	"encoding/json"
	"fmt"
)

// DecodeFields decodes each key of fields that the config.json object raw
// holds, and that is not null, into its destination (a pointer). An error
// names the key and its value; callers wrap it with the file's name and
// their model's sentinel.
func DecodeFields(raw map[string]json.RawMessage, fields map[string]any) error {
	for key, dst := range fields {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			continue
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("%s = %s: %v", key, v, err)
		}
	}
	return nil
}
