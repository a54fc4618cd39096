/** The part of mvdan-sh (mvdan/sh's bash parser, compiled to JavaScript) that core/policy/bash-command.ts uses. */
declare module 'mvdan-sh' {
  interface Pos {
    Offset(): number;
  }
  export interface ShNode {
    Pos(): Pos;
    End(): Pos;
    [field: string]: unknown;
  }
  const sh: {
    syntax: {
      NewParser(): { Parse(src: string, name: string): ShNode };
      Walk(node: ShNode, visit: (node: ShNode | null) => boolean): void;
      NodeType(node: ShNode): string;
    };
  };
  export default sh;
}
