// Package whatsapp reads what the WhatsApp bridge leaves on disk for hermes:
// the lid-mapping-<id>.json and lid-mapping-<id>_reverse.json files that tie
// a phone-number JID to its LID (and back).
//
// It only reads. It never writes or repairs the bridge's files, and it does
// not walk the alias graph or pick a canonical id: that rule belongs to the
// domain (domain.WhatsAppAliases), which this package must not import.
// Adapters depend only on the ports of events, commands and projections.
package whatsapp
