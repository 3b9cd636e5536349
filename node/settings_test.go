package node

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hermes/adapters/config"
	"hermes/commands"
	"hermes/domain"
)

func TestCommands(t *testing.T) {
	c := config.Default()
	c.SessionReset = config.ResetPolicy{Mode: "idle", AtHour: 5, IdleMinutes: 60, Notify: false, NotifyExcludePlatforms: []string{"cli"}}
	c.Platforms = map[string]config.ResetPolicy{"telegram": {Mode: "daily", AtHour: 3, IdleMinutes: 1440, Notify: true}}
	c.ResetByType = map[string]config.ResetPolicy{"thread": {Mode: "none", AtHour: 4, IdleMinutes: 1440}}
	c.GroupSessionsPerUser = false
	c.ThreadSessionsPerUser = true
	c.MultiplexProfiles = true
	c.Profile = "coder"
	c.Timezone = "Europe/Berlin"
	c.Agent.GatewayAutoContinueFreshness = 90 * time.Second

	got := WriteSideConfig(c)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	want := commands.Config{
		Keys: domain.KeyOptions{GroupSessionsPerUser: false, ThreadSessionsPerUser: true, MultiplexProfiles: true, Profile: "coder"},
		Policies: domain.ResetPolicies{
			Default:    domain.ResetPolicy{Mode: domain.ResetIdle, AtHour: 5, IdleMinutes: 60, Notify: false, NotifyExcludePlatforms: []string{"cli"}},
			ByPlatform: map[string]domain.ResetPolicy{"telegram": {Mode: domain.ResetDaily, AtHour: 3, IdleMinutes: 1440, Notify: true}},
			ByType:     map[string]domain.ResetPolicy{"thread": {Mode: domain.ResetNone, AtHour: 4, IdleMinutes: 1440}},
		},
		Location:        berlin,
		ResumeFreshness: 90 * time.Second,
		Queue:           commands.QueueSettings{BusyInputMode: "interrupt", MaxItems: 32, TTL: 24 * time.Hour},
	}
	opts := cmp.Options{
		cmp.Comparer(func(a, b *time.Location) bool { return a.String() == b.String() }),
	}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("Commands() mismatch (-want +got):\n%s", diff)
	}
	for name, p := range map[string]domain.ResetPolicy{"default": got.Policies.Default, "telegram": got.Policies.ByPlatform["telegram"]} {
		if err := p.Validate(); err != nil {
			t.Errorf("Commands() %s policy: Validate() = %v", name, err)
		}
	}
	if p := got.Policies.For("telegram", "thread"); p.Mode != domain.ResetDaily {
		t.Errorf("Commands().Policies.For(telegram, thread).Mode = %q, want daily", p.Mode)
	}
}

func TestCommandsDefaults(t *testing.T) {
	got := WriteSideConfig(config.Default())
	want := commands.DefaultConfig()
	want.Location = time.Local
	opts := cmp.Options{
		cmp.Comparer(func(a, b *time.Location) bool { return a == b }),
	}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("Default().Commands() differs from commands.DefaultConfig() in time.Local (-want +got):\n%s", diff)
	}
}
