package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/runbox-mcp/runbox/sandbox"
)

// sessionRow is one session box as `runbox sessions` shows it.
type sessionRow struct {
	Box      string    `json:"box"`
	Language string    `json:"language"`
	Key      string    `json:"key"`
	Client   string    `json:"client"`
	EndsAt   time.Time `json:"ends_at"`
	OwnerPID string    `json:"owner_pid"`
}

// listSessions lists the session boxes on the backend, any server's.
func listSessions(ctx context.Context, cfg config, r *sandbox.BoxRunner) (int, error) {
	if err := r.Ready(ctx); err != nil {
		return 1, err
	}
	found, err := r.Driver().FindBoxes(ctx, map[string]string{sandbox.LabelSession: ""})
	if err != nil {
		return 1, err
	}
	rows := make([]sessionRow, 0, len(found))
	for _, b := range found {
		end, _ := strconv.ParseInt(b.Labels[sandbox.LabelSessionExpires], 10, 64)
		rows = append(rows, sessionRow{Box: b.ID[:min(12, len(b.ID))], Language: b.Labels[sandbox.LabelLanguage],
			Key: b.Labels[sandbox.LabelSession], Client: b.Labels[sandbox.LabelSessionClient],
			EndsAt: time.Unix(end, 0).UTC(), OwnerPID: b.Labels[sandbox.LabelOwnerPID]})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].EndsAt.Before(rows[j].EndsAt) })
	if cfg.jsonOut {
		return 0, printJSON(rows)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BOX\tLANGUAGE\tKEY\tCLIENT\tENDS IN\tOWNER PID")
	for _, s := range rows {
		fmt.Fprintf(w, "%s\t%s\t%.16s\t%.12s\t%s\t%s\n", s.Box, s.Language, s.Key, s.Client, time.Until(s.EndsAt).Round(time.Second), s.OwnerPID)
	}
	return 0, w.Flush()
}
