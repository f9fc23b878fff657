package retrieval_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/cordon-rag/cordon/retrieval"
)

// filled returns a Policy with every field, nested ones included, set to a
// value no other call with another seed gives and no profile holds (the
// values need not be valid: Patch and Apply do not validate).
func filled(t *testing.T, seed int) retrieval.Policy {
	t.Helper()
	var p retrieval.Policy
	n := seed * 1000
	var fill func(v reflect.Value, path string)
	fill = func(v reflect.Value, path string) {
		n++
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(seed%2 == 1)
		case reflect.Int, reflect.Int64:
			v.SetInt(int64(n))
		case reflect.Float64:
			v.SetFloat(float64(n) + 0.25)
		case reflect.String:
			v.SetString(path + "-" + strconv.Itoa(n))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), path)
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		default:
			t.Fatalf("Policy%s: kind %s: teach filled to set it", path, v.Kind())
		}
	}
	fill(reflect.ValueOf(&p).Elem(), "")
	return p
}

// nilFields lists the fields of v (a struct, pointers followed) that are nil
// pointers.
func nilFields(v reflect.Value, path string) []string {
	var out []string
	for i := range v.NumField() {
		f, name := v.Field(i), path+"."+v.Type().Field(i).Name
		if f.Kind() != reflect.Pointer {
			continue
		}
		if f.IsNil() {
			out = append(out, name)
			continue
		}
		if f.Elem().Kind() == reflect.Struct {
			out = append(out, nilFields(f.Elem(), name)...)
		}
	}
	return out
}

// TestPolicyPatchRoundTrip: Patch carries every field of a Policy, so
// applying it over any base gives the policy back, as Go values and through
// the wire form. A field added to Policy (or to PolicyPatch) that Patch
// does not carry fails here whatever its type, since every field of the
// policy is set by reflection.
func TestPolicyPatchRoundTrip(t *testing.T) {
	// A patch cannot remove a base's freshness contract (absent and null
	// keep it), so the bases have none but the last, which only policies
	// with a contract of their own are applied over.
	unfresh := filled(t, 2)
	unfresh.MaxStaleTicks = nil
	bases := []struct {
		name string
		p    retrieval.Policy
	}{
		{"zero", retrieval.Policy{}},
		{"seed profile", retrieval.DefaultPolicy()},
		{"service profile", retrieval.ServicePolicy()},
		{"another filled policy without freshness", unfresh},
		{"another filled policy", filled(t, 2)},
	}
	policies := []struct {
		name string
		p    retrieval.Policy
	}{
		{"every field set", filled(t, 1)},
		{"seed profile", retrieval.DefaultPolicy()},
		{"service profile", retrieval.ServicePolicy()},
		{"model profile", retrieval.ModelDefaults().Apply(retrieval.ServicePolicy())},
	}
	for _, pt := range policies {
		for _, bt := range bases {
			if bt.p.MaxStaleTicks != nil && pt.p.MaxStaleTicks == nil {
				continue
			}
			t.Run(pt.name+" over "+bt.name, func(t *testing.T) {
				patch := pt.p.Patch()
				if got := patch.Apply(bt.p); !reflect.DeepEqual(got, pt.p) {
					t.Fatalf("Apply(Patch()) = %+v, want %+v", got, pt.p)
				}
				wire, err := json.Marshal(patch)
				if err != nil {
					t.Fatal(err)
				}
				var back retrieval.PolicyPatch
				if err := json.Unmarshal(wire, &back); err != nil {
					t.Fatal(err)
				}
				if got := back.Apply(bt.p); !reflect.DeepEqual(got, pt.p) {
					t.Fatalf("through %s: %+v, want %+v", wire, got, pt.p)
				}
			})
		}
	}
	// Every field of the patch is set, so nothing is left to the base.
	if missing := nilFields(reflect.ValueOf(filled(t, 1).Patch()).Elem(), "PolicyPatch"); len(missing) > 0 {
		t.Fatalf("Patch leaves %v unset", missing)
	}
	// The patch holds copies: changing it leaves the policy as it was.
	p := filled(t, 1)
	patch := p.Patch()
	*patch.TopN, *patch.MaxStaleTicks, *patch.RRFWeights.BM25 = -1, -1, -1
	if !reflect.DeepEqual(p, filled(t, 1)) {
		t.Fatalf("changing the patch changed the policy: %+v", p)
	}
}

// A policy without a freshness contract gives a patch that names none.
func TestPolicyPatchNoFreshness(t *testing.T) {
	p := retrieval.ServicePolicy()
	patch := p.Patch()
	if patch.MaxStaleTicks != nil {
		t.Fatalf("max_stale_ticks %d, want absent", *patch.MaxStaleTicks)
	}
	wire, _ := json.Marshal(patch)
	var m map[string]any
	if err := json.Unmarshal(wire, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["max_stale_ticks"]; ok {
		t.Fatalf("wire form %s names max_stale_ticks", wire)
	}
}
