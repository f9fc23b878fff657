// Package cordontype holds Cordon's shared domain types: documents, chunks,
// principals, classifications and the validation rules of SPEC section 2.
//
// It is a leaf package: every other Cordon package may import it and it imports
// none of them, which keeps the pure cores (chunking, scoring, fusion) and the
// stores free of import cycles.
//
// # Validation
//
// Every value that enters Cordon from outside (a replay script, a CLI flag, an
// HTTP body) is checked here before anything is stored: [ValidateTenant],
// [ValidateDocID], [ValidateBarriers], [ValidateTick] and [Document.Validate].
// Each returns an error that says what is wrong and what is allowed.
package cordontype
