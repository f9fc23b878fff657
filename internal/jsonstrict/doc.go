// Package jsonstrict is Cordon's one strict JSON decoder, shared by the HTTP
// API's request bodies, token claims and the replay format's steps.
//
// [ValidUTF8] refuses text encoding/json would repair; [Walk] is a single
// pass over the bytes that checks syntax, the depth limit [MaxDepth],
// duplicate keys and a caller's key rule before anything is decoded;
// [Decoder] puts them in front of encoding/json and cleans its errors
// ([CleanError]) in the wording each contract pins.
package jsonstrict
