package cordontype

import "errors"

// ErrInvalid is wrapped by every validation error in this package (the
// Validate methods, the Validate* and Parse* functions and the JSON decoding
// of a Classification), so callers can tell bad input (a client error) from
// a failure of the system with errors.Is(err, ErrInvalid).
var ErrInvalid = errors.New("invalid input")

// invalid returns an error that wraps ErrInvalid with a message saying what is
// wrong.
func invalid(msg string) error {
	return &invalidError{msg: msg}
}

type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() error { return ErrInvalid }
