package check

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A sharded run's managers (Config.Managers of them) are a meta group,
// as `flint cluster up --groups` runs them: manager i is
//
//	flint serve --manager --id i --initial-members <the managers> --servers <every data member> --replicas R
//
// in dir/manager/m<i>, its peer traffic through a relay like a data
// member's, its first map that of the data groups, the slots split evenly.
// The map it logs outlives its kills, and every data node and client is
// given every manager's client address. A single manager is a meta group
// of one, on its disk too: so that kill-manager may strike it.
//
// kill-manager kills the meta group's leader (see killManager), and, when
// move-slots or split is among the faults too, half their moves have the
// leader killed while they are under way (see duringMove): the managers
// take a move's steps themselves, so the one that takes over (or the one
// that comes back) must finish it.

// newManagers makes the members of the meta group of cfg.Managers in
// dir/manager, and holds their addresses; makeManagers gives them their
// flags once the data groups are known.
func newManagers(cfg Config, bin, dir string) (*cluster, error) {
	ms := &cluster{bin: bin, dir: filepath.Join(dir, "manager"), env: cfg.ServerEnv}
	if err := ms.addMembers(cfg.Managers); err != nil {
		return nil, err
	}
	return ms, nil
}

// makeManagers makes ms a meta group whose first map is of the data
// groups whose members' client addresses are servers (as --servers lists
// them), replicas to a group.
func (ms *cluster) makeManagers(servers []string, replicas int) {
	ms.makeGroup("--manager", "--servers", strings.Join(servers, ","), "--replicas", strconv.Itoa(replicas))
}

// describeManagers names the managers for the summary.
func (f *fleet) describeManagers() string {
	if len(f.managers.members) == 1 {
		return "manager " + f.managers.members[0].srv.addr
	}
	return fmt.Sprintf("%d managers %s", len(f.managers.members), strings.Join(f.managers.addrs(), " "))
}

// killManager kills the managers' leader with SIGKILL, or, if none leads
// (a majority of them down), a running one at random; it stays down 0.5 to
// 1.5 intervals (restartDue), whether or not a majority is left, since
// the data groups must serve without managers. It returns the fault's
// description.
func (n *nemesis) killManager() (string, error) {
	ms := n.fl.managers
	m, err := ms.leader(2 * time.Second)
	kind := "kill-manager"
	if err != nil {
		if m = n.pick(ms.running()); m == nil {
			return kind + ": all down", nil
		}
		kind = "kill-manager (no leader)"
	}
	if err := m.srv.kill(); err != nil {
		return kind, err
	}
	m.down = time.Now().Add(n.interval/2 + time.Duration(n.rng.Int64N(int64(n.interval))))
	return fmt.Sprintf("%s %d, %d down", kind, m.id, len(ms.members)-len(ms.running())), nil
}

// duringMove runs change, a change of the map whose moves the managers
// take, within moveSlotsTimeout. If kill-manager is among the faults,
// half the time it kills the managers' leader meanwhile, 0 to 200 ms
// after the change starts (it records its moves first), and restarts it
// 0.5 to 1.5 intervals later, then waits for the change to end. A change
// that failed then, as `flint cluster add-group` does when no manager
// answers, is run again, as an operator would: called again with the same
// arguments, it resumes (clusterctl's AddGroup, MoveSlots). It returns
// what it killed, for the fault's description.
func (n *nemesis) duringMove(change func(context.Context) error) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), moveSlotsTimeout)
	defer cancel()
	if !slices.Contains(n.faults, FaultKillManager) || n.rng.IntN(2) == 0 {
		return "", change(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- change(ctx) }()
	select {
	case err := <-done:
		return "", err
	case <-time.After(time.Duration(n.rng.Int64N(int64(200 * time.Millisecond)))):
	}
	m, err := n.fl.managers.leader(2 * time.Second)
	if err != nil {
		cancel()
		<-done
		return "", err
	}
	if err := m.srv.kill(); err != nil {
		cancel()
		<-done
		return "", err
	}
	time.Sleep(n.interval/2 + time.Duration(n.rng.Int64N(int64(n.interval))))
	if err := m.srv.start(); err != nil {
		cancel()
		<-done
		return "", fmt.Errorf("manager %d: restart after kill -9: %w", m.id, err)
	}
	kind := fmt.Sprintf(", kill-manager %d under way", m.id)
	if err := <-done; err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), moveSlotsTimeout)
		defer cancel()
		return fmt.Sprintf("%s, run again after %q", kind, err), change(ctx)
	}
	return kind, nil
}

// awaitMoves waits until the managers' map lists no move, within
// moveSlotsTimeout, so that the final reads find every slot's owner
// serving it; the moves still listed then are the error.
func (f *fleet) awaitMoves() error {
	ctx, cancel := context.WithTimeout(context.Background(), moveSlotsTimeout)
	defer cancel()
	for {
		sh, err := f.admin().ShardStatus(ctx)
		if err == nil && len(sh.Map.Moves) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("the map still lists moves %v", sh.Map.Moves)
			}
			return fmt.Errorf("%w: waiting for the managers to end the moves: %w", ErrServer, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
