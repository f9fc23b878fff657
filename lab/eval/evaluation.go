package eval

// Evaluation is one evaluation as `cordon-lab eval --json` writes it: where its inputs
// came from, its report, and its bake-off when one was run.
type Evaluation struct {
	Meta    Meta            `json:"meta"`
	Report  Report          `json:"report"`
	BakeOff []VariantReport `json:"bakeoff,omitempty"`
}
